// A ScatterElements along axis 0 whose indices are one column expanded over the other dimensions
// scatters whole rows: it is a ScatterND whose tuples are that column. PyTorch Geometric
// aggregates messages so (index.view(-1, 1).expand_as(src), then scatter_add_ or
// scatter_reduce_), and the expanded int64 index, twice the size of the float messages, was
// built by an Expand only for the scatter to read one index per element (GraphSAGE: the Expands
// 17% of the time, the scatters 50%). The rewrite drops the Expand's copy, and the scatter reads
// one index per row.
//
// Only where it is the same computation: the updates' other dimensions are the data's
// (ScatterElements may also scatter a narrower block), the Expand yields exactly the updates'
// shape, and the column has the updates' row count. An Expand may also repeat one index over
// every row: where the row counts are dynamic (graphs exported with a dynamic edge count), the
// column is expanded to [rows of the updates, 1] at run time, which repeats one index as the
// original did and costs a copy of E indices instead of E x C.
#include <string>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/graph/transformations/transformations.hpp"

namespace troupe::transformations {

namespace {

// The column [E, 1, ..., 1] whose expansion the node scatters by row, or no_value.
ValueId row_index_column(const Model& model, const Node& node, const std::vector<int>& producer) {
  if ((node.op_type != "ScatterElements" && node.op_type != "Scatter") || node.inputs.size() != 3 ||
      node.outputs.size() != 1)
    return no_value;
  const Shape& data = model.value(node.inputs[0]).shape;
  const Shape& updates = model.value(node.inputs[2]).shape;
  const auto rank = static_cast<int64_t>(data.rank());
  const int64_t axis = node.attributes.get_int_or("axis", 0);
  if (rank < 2 || (axis != 0 && axis != -rank) || updates.rank() != data.rank()) return no_value;
  for (size_t d = 1; d < data.rank(); ++d)
    if (data[d] != updates[d] || data[d] == Shape::dynamic) return no_value;
  const int p = producer[static_cast<size_t>(node.inputs[1])];
  if (p < 0) return no_value;
  const Node& expand = model.nodes()[static_cast<size_t>(p)];
  if (!is_op(expand, "Expand", 2) || model.value(expand.outputs[0]).shape != updates)
    return no_value;
  const ValueInfo& column = model.value(expand.inputs[0]);
  const bool dynamic_rows = column.shape[0] == Shape::dynamic && updates[0] == Shape::dynamic;
  if (column.type != ElementType::i64 || column.shape.rank() != data.rank() ||
      (column.shape[0] != updates[0] && !dynamic_rows))
    return no_value;
  for (size_t d = 1; d < column.shape.rank(); ++d)
    if (column.shape[d] != 1) return no_value;
  return expand.inputs[0];
}

}  // namespace

size_t scatter_whole_rows(Model& model) {
  const std::vector<int> producer = producers(model);
  return expand_nodes(model, [&](const Node& node, std::vector<Node>& nodes) {
    ValueId tuples = row_index_column(model, node, producer);
    if (tuples == no_value) return false;
    const std::string base = node.name + "/row_indices";
    auto value = [&](const std::string& suffix, ElementType type, Shape shape) {
      return model.add_value({unique_value_name(model, base + suffix), type, std::move(shape)});
    };
    const int64_t rows = model.value(tuples).shape[0];
    if (model.value(tuples).shape.rank() != 2) {
      // ScatterND's tuples are [E, 1]: the updates are the tuples' shape and a row's.
      const ValueId shape =
          model.add_constant(unique_value_name(model, base + "/shape"), int64_tensor({-1, 1}));
      const ValueId reshaped = value("/column", ElementType::i64, Shape{rows, 1});
      nodes.push_back(Node{base + "/column", "Reshape", {tuples, shape}, {reshaped}, {}});
      tuples = reshaped;
    }
    if (rows == Shape::dynamic) {
      Node count{base + "/count",
                 "Shape",
                 {node.inputs[2]},
                 {value("/count", ElementType::i64, Shape{1})},
                 {}};
      count.attributes.set("start", int64_t{0});
      count.attributes.set("end", int64_t{1});
      const ValueId one =
          model.add_constant(unique_value_name(model, base + "/one"), int64_tensor({1}));
      Node target{base + "/target",
                  "Concat",
                  {count.outputs[0], one},
                  {value("/target", ElementType::i64, Shape{2})},
                  {}};
      target.attributes.set("axis", int64_t{0});
      Node repeat{base,
                  "Expand",
                  {tuples, target.outputs[0]},
                  {value("", ElementType::i64, Shape{rows, 1})},
                  {}};
      tuples = repeat.outputs[0];
      nodes.push_back(std::move(count));
      nodes.push_back(std::move(target));
      nodes.push_back(std::move(repeat));
    }
    Node scatter{
        node.name, "ScatterND", {node.inputs[0], tuples, node.inputs[2]}, node.outputs, {}};
    const std::string reduction = node.attributes.get_string_or("reduction", "none");
    if (reduction != "none") scatter.attributes.set("reduction", reduction);
    nodes.push_back(std::move(scatter));
    return true;
  });
}

}  // namespace troupe::transformations
