// Constant folding: nodes computable at compile time become constants. This removes the
// Shape -> Gather -> Concat -> Reshape chains exporters emit for static input shapes, and those
// that read only the static dimensions of a value whose batch is dynamic: torch's
// MultiheadAttention slices its stacked projection weights at bounds computed from the embedding
// width (Shape -> Slice -> Squeeze -> Mul -> Slice of the weights), and with a dynamic batch the
// sliced weights stayed run-time values, so the projections ran as products of unknown shapes
// (the reference's, 10 ms of a 32 ms seq2seq decoder).
#include <algorithm>
#include <exception>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/graph/compiled_graph.hpp"
#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/transformations.hpp"
#include "engine/ops/op_schema.hpp"
#include "kernels/kernel_registry.hpp"

namespace troupe::transformations {

namespace {

// Folding evaluates a node once; for these the result must differ per run.
bool is_nondeterministic(const std::string& op_type) {
  return op_type.find("Random") != std::string::npos || op_type == "Multinomial" ||
         op_type == "Bernoulli";
}

// Folded results stay in memory as constants: skip ones that would be huge (e.g. a ConstantOfShape
// filling an activation-sized buffer is cheaper to compute than to keep).
constexpr int64_t max_folded_elements = int64_t{1} << 24;

// The dims a Shape node outputs for an input of `shape`: those of its start..end range.
std::vector<int64_t> shape_dims(const Node& node, const Shape& shape) {
  const auto rank = static_cast<int64_t>(shape.rank());
  auto clamp = [rank](int64_t axis) {
    if (axis < 0) axis += rank;
    return std::clamp<int64_t>(axis, 0, rank);
  };
  const int64_t start = clamp(node.attributes.get_int_or("start", 0));
  const int64_t end = clamp(node.attributes.get_int_or("end", rank));
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(shape[static_cast<size_t>(i)]);
  return dims;
}

// Shape and Size depend only on the input's shape, which may be static for a non-constant value.
bool fold_shape_query(Model& model, const Node& node) {
  if ((node.op_type != "Shape" && node.op_type != "Size") || node.inputs.size() != 1 ||
      node.outputs.size() != 1 || node.inputs[0] == no_value)
    return false;
  const Shape& shape = model.value(node.inputs[0]).shape;
  if (!shape.is_static()) return false;
  if (node.op_type == "Size") {
    model.set_constant(node.outputs[0],
                       Tensor::from_vector<int64_t>(Shape{}, {shape.element_count()}));
    return true;
  }
  const std::vector<int64_t> dims = shape_dims(node, shape);
  const int64_t count = static_cast<int64_t>(dims.size());
  model.set_constant(node.outputs[0], Tensor::from_vector<int64_t>(Shape{count}, dims));
  return true;
}

// Runs the node's reference kernel on its constant inputs; false when it cannot be evaluated here.
bool fold_by_evaluation(Model& model, const Node& node) {
  for (ValueId in : node.inputs)
    if (in != no_value && !model.is_constant(in)) return false;
  int64_t elements = 0;
  for (ValueId out : node.outputs) {
    const ValueInfo& v = model.value(out);
    if (v.type == ElementType::undefined || !v.shape.is_static()) return false;
    elements += v.shape.element_count();
  }
  if (elements > max_folded_elements) return false;

  std::vector<Tensor> inputs;
  for (ValueId in : node.inputs)
    inputs.push_back(in == no_value ? Tensor() : model.constants().at(in));
  // Without a result the node stays and fails (or not) at run time as without folding.
  const std::optional<std::vector<Tensor>> outputs =
      run_reference_kernel(detail::make_kernel_request(model, node), inputs);
  if (!outputs) return false;
  for (size_t i = 0; i < node.outputs.size(); ++i)
    model.set_constant(node.outputs[i], (*outputs)[i]);
  return true;
}

// The dims a Shape node's output holds where its input's shape is not static: -1 for each dynamic
// one. A Gather or Slice of it that picks static dims alone folds to those.
using PartialShapes = std::unordered_map<ValueId, std::vector<int64_t>>;

void record_partial_shape(const Model& model, const Node& node, PartialShapes& partial) {
  if (node.op_type != "Shape" || node.inputs.size() != 1 || node.outputs.size() != 1 ||
      node.inputs[0] == no_value)
    return;
  const std::vector<int64_t> dims = shape_dims(node, model.value(node.inputs[0]).shape);
  partial[node.outputs[0]] = dims;
}

// A Gather (axis 0) or Slice of a partially known shape whose indices and bounds are constants
// and which picks known dims alone: the picked dims as a constant.
bool fold_partial_shape_pick(Model& model, const Node& node, const PartialShapes& partial) {
  if ((node.op_type != "Gather" && node.op_type != "Slice") || node.inputs.size() < 2 ||
      node.outputs.size() != 1)
    return false;
  const auto it = partial.find(node.inputs[0]);
  if (it == partial.end()) return false;
  for (size_t i = 1; i < node.inputs.size(); ++i)
    if (node.inputs[i] != no_value && !model.is_constant(node.inputs[i])) return false;
  const std::vector<int64_t>& dims = it->second;
  // Evaluated by the reference kernel on the dims, the unknown ones -1: the result folds when
  // none of them was picked.
  Tensor data = Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(dims.size())}, dims);
  std::vector<Tensor> inputs = {data};
  for (size_t i = 1; i < node.inputs.size(); ++i)
    inputs.push_back(node.inputs[i] == no_value ? Tensor() : model.constants().at(node.inputs[i]));
  kernels::KernelRequest request = detail::make_kernel_request(model, node);
  request.inputs[0].shape = data.shape();
  const ValueInfo& out = model.value(node.outputs[0]);
  if (out.type != ElementType::i64 || !out.shape.is_static()) return false;
  const std::optional<std::vector<Tensor>> picked = run_reference_kernel(request, inputs);
  if (!picked || (*picked)[0].shape() != out.shape) return false;
  const std::vector<int64_t> values = (*picked)[0].to_vector<int64_t>();
  if (std::any_of(values.begin(), values.end(), [](int64_t d) { return d < 0; })) return false;
  model.set_constant(node.outputs[0], (*picked)[0]);
  return true;
}

bool writes_model_output(const Model& model, const Node& node) {
  for (ValueId out : node.outputs)
    if (is_model_output(model, out)) return true;
  return false;
}

bool try_fold(Model& model, const Node& node, PartialShapes& partial) {
  if (writes_model_output(model, node) || node.outputs.empty() || is_nondeterministic(node.op_type))
    return false;
  if (fold_shape_query(model, node) || fold_by_evaluation(model, node) ||
      fold_partial_shape_pick(model, node, partial))
    return true;
  record_partial_shape(model, node, partial);
  return false;
}

// Infers the outputs of one node from its (already known) inputs; false when its schema rejects
// them (validate() reports that later, with the whole graph).
bool infer_node(Model& model, const Node& node) {
  const OpSchema* schema = OpSchemaRegistry::instance().find(node.op_type);
  if (schema == nullptr || node.inputs.size() < schema->min_inputs ||
      node.inputs.size() > schema->max_inputs || node.outputs.size() < schema->min_outputs ||
      node.outputs.size() > schema->max_outputs)
    return false;
  ShapeInferContext ctx{node, {}, {}};
  for (ValueId in : node.inputs) {
    ctx.inputs.push_back(in == no_value ? ValueInfo{} : model.value(in));
    ctx.constant_inputs.push_back(
        in != no_value && model.is_constant(in) ? &model.constants().at(in) : nullptr);
  }
  std::vector<ValueInfo> outputs;
  try {
    outputs = schema->infer(ctx);
  } catch (const std::exception&) {
    return false;
  }
  if (outputs.size() < node.outputs.size()) return false;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] == no_value) continue;
    ValueInfo& v = model.value(node.outputs[i]);
    v.type = outputs[i].type;
    v.shape = outputs[i].shape;
  }
  return true;
}

}  // namespace

std::optional<std::vector<Tensor>> run_reference_kernel(const kernels::KernelRequest& request,
                                                        const std::vector<Tensor>& inputs) {
  try {
    auto kernel = kernels::KernelRegistry::instance().create_with("reference", request);
    if (!kernel) return std::nullopt;
    std::vector<Tensor> outputs;
    for (const ValueInfo& out : request.outputs) outputs.emplace_back(out.type, out.shape);
    kernel->execute(inputs, outputs);
    return outputs;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

size_t fold_constants_unvalidated(Model& model) {
  const std::vector<Node>& nodes = model.nodes();
  std::vector<bool> known(model.values().size(), false);
  for (ValueId in : model.inputs()) known[static_cast<size_t>(in)] = true;
  for (const auto& [id, tensor] : model.constants()) known[static_cast<size_t>(id)] = true;
  std::vector<bool> visited(nodes.size(), false);
  std::vector<bool> folded(nodes.size(), false);
  PartialShapes partial;
  size_t count = 0;
  // Sweeps in dependency order (the node list need not be sorted yet); a node whose inference
  // fails leaves its outputs unknown, and so everything after it unvisited.
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (visited[i]) continue;
      bool ready = true;
      for (ValueId in : nodes[i].inputs)
        if (in != no_value && !known[static_cast<size_t>(in)]) ready = false;
      if (!ready) continue;
      visited[i] = true;
      progress = true;
      if (!infer_node(model, nodes[i])) continue;
      for (ValueId out : nodes[i].outputs)
        if (out != no_value) known[static_cast<size_t>(out)] = true;
      // Quantized weights stay integer here: the QDQ fusion (run_all) reads them through their
      // DequantizeLinear; the folding there turns whatever it leaves into float constants.
      if (nodes[i].op_type == "DequantizeLinear") continue;
      if (try_fold(model, nodes[i], partial)) {
        folded[i] = true;
        ++count;
      }
    }
  }
  if (count == 0) return 0;
  std::vector<Node> kept;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!folded[i]) kept.push_back(nodes[i]);
  model.set_nodes(std::move(kept));
  return count;
}

size_t fold_constants(Model& model) {
  // Nodes are in topological order, so a folded node's constant outputs are visible to the nodes
  // after it within the same sweep.
  // A folded node is replaced by nothing: its outputs are constants now.
  PartialShapes partial;
  return expand_nodes(
      model, [&](const Node& node, std::vector<Node>&) { return try_fold(model, node, partial); });
}

}  // namespace troupe::transformations
