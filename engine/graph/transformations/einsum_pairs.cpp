// An Einsum of three or more operands ("bhde,bhnd,bhn->bhne": a Performer's linear attention and
// its normaliser in one equation) ran on the reference kernel, which loops over every
// combination of every label: 52 ms for one such node, 98% of a 4-layer Performer's time.
// Contracted a pair at a time, as numpy's einsum_path does, each step is a two-operand Einsum the
// matmul kernel runs. The pair taken next is the one whose result is smallest, then the one
// whose product is cheapest, so that a scaling by a vector happens before a product rather than
// an outer product being built. A pair's result keeps the labels the output or a later operand
// still needs.
//
// Equations with '...' (whose dimensions broadcast) or a label repeated within one operand (a
// diagonal) stay whole.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/transformations.hpp"
#include "engine/ops/einsum.hpp"

namespace troupe::transformations {

namespace {

struct Operand {
  std::vector<int> labels;
  ValueId value;
};

std::string letters(const std::vector<int>& labels) {
  std::string text;
  for (int label : labels) text += einsum::label_name(label);
  return text;
}

// The labels of operands a and b that the output or another operand still reads: the output's
// first, in its order, then the rest in the order a and b hold them.
std::vector<int> kept_labels(const std::vector<Operand>& operands, size_t a, size_t b,
                             const std::vector<int>& output) {
  auto needed = [&](int label) {
    if (einsum::has_label(output, label)) return true;
    for (size_t k = 0; k < operands.size(); ++k)
      if (k != a && k != b && einsum::has_label(operands[k].labels, label)) return true;
    return false;
  };
  std::vector<int> kept;
  for (int label : output)
    if ((einsum::has_label(operands[a].labels, label) ||
         einsum::has_label(operands[b].labels, label)) &&
        !einsum::has_label(kept, label))
      kept.push_back(label);
  for (const std::vector<int>* labels : {&operands[a].labels, &operands[b].labels})
    for (int label : *labels)
      if (needed(label) && !einsum::has_label(kept, label)) kept.push_back(label);
  return kept;
}

}  // namespace

size_t contract_einsums_in_pairs(Model& model) {
  return expand_nodes(model, [&](const Node& node, std::vector<Node>& nodes) {
    if (node.op_type != "Einsum" || node.inputs.size() < 3 || node.outputs.size() != 1)
      return false;
    std::vector<size_t> ranks;
    for (ValueId in : node.inputs) {
      if (in == no_value) return false;
      ranks.push_back(model.value(in).shape.rank());
    }
    const einsum::Equation eq = einsum::parse(node.attributes.get_string_or("equation", ""), ranks);
    if (!eq.error.empty() || eq.ellipsis_rank > 0) return false;
    // Each label's size where an operand's shape knows it; the choice of pairs takes an unknown
    // one as 16.
    std::map<int, int64_t> size;
    std::vector<Operand> operands;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const std::vector<int>& labels = eq.inputs[i];
      for (size_t d = 0; d < labels.size(); ++d) {
        if (std::count(labels.begin(), labels.end(), labels[d]) > 1) return false;
        const int64_t n = model.value(node.inputs[i]).shape[d];
        if (n != Shape::dynamic) size[labels[d]] = n;
      }
      operands.push_back({labels, node.inputs[i]});
    }
    auto extent = [&](const std::vector<int>& labels) {
      double product = 1;
      for (int label : labels) product *= size.count(label) ? size[label] : 16;
      return product;
    };
    const ElementType type = model.value(node.outputs[0]).type;
    for (int step = 0; operands.size() > 2; ++step) {
      size_t best_a = 0, best_b = 1;
      double best_size = std::numeric_limits<double>::infinity(), best_cost = best_size;
      for (size_t a = 0; a < operands.size(); ++a)
        for (size_t b = a + 1; b < operands.size(); ++b) {
          std::vector<int> all = operands[a].labels;
          for (int label : operands[b].labels)
            if (!einsum::has_label(all, label)) all.push_back(label);
          const double result = extent(kept_labels(operands, a, b, eq.output));
          const double cost = extent(all);
          if (result < best_size || (result == best_size && cost < best_cost)) {
            best_size = result;
            best_cost = cost;
            best_a = a;
            best_b = b;
          }
        }
      const std::vector<int> kept = kept_labels(operands, best_a, best_b, eq.output);
      std::vector<int64_t> dims;
      for (int label : kept) dims.push_back(size.count(label) ? size[label] : Shape::dynamic);
      const std::string name = node.name + "/pair_" + std::to_string(step);
      const ValueId result = model.add_value({unique_value_name(model, name), type, Shape(dims)});
      Node pair{name, "Einsum", {operands[best_a].value, operands[best_b].value}, {result}, {}};
      pair.attributes.set("equation", letters(operands[best_a].labels) + "," +
                                          letters(operands[best_b].labels) + "->" + letters(kept));
      nodes.push_back(std::move(pair));
      operands[best_a] = {kept, result};
      operands.erase(operands.begin() + static_cast<std::ptrdiff_t>(best_b));
    }
    Node last{node.name, "Einsum", {operands[0].value, operands[1].value}, node.outputs, {}};
    last.attributes.set("equation", letters(operands[0].labels) + "," +
                                        letters(operands[1].labels) + "->" + letters(eq.output));
    nodes.push_back(std::move(last));
    return true;
  });
}

}  // namespace troupe::transformations
