// Fuses Conv / MatMul / Gemm with the residual Add and the Relu that follow it into one node, so
// that the fast backend applies them as post-ops while the result is still in cache. The fused
// node keeps the anchor's name and op type and takes over the last absorbed node's output value.
#include <string>
#include <vector>

#include "engine/ops/fused_post_ops.hpp"
#include "engine/transformations/graph_queries.hpp"
#include "engine/transformations/transformations.hpp"

namespace troupe::transformations {

namespace {

// Number of inputs of the unfused op: the residual of a fused sum goes after them. Gemm takes no
// residual (its C is already an addend; see kernels/dnnl/matmul.cpp).
size_t sum_input_index(const std::string& op_type) {
  if (op_type == "Conv") return 3;
  if (op_type == "MatMul") return 2;
  return 0;
}

bool is_anchor(const Node& node) {
  return (node.op_type == "Conv" || node.op_type == "MatMul" || node.op_type == "Gemm") &&
         node.outputs.size() == 1 && !fused::is_fused(node);
}

bool is_float(ElementType type) {
  return type == ElementType::f32 || type == ElementType::f64;
}

}  // namespace

size_t fuse_post_ops(Model& model, OriginalNames& names) {
  const std::vector<int> consumer = single_consumers(model);
  std::vector<Node> nodes = model.nodes();
  std::vector<bool> removed(nodes.size(), false);
  size_t fused_count = 0;

  // The node reading `value` when it is the only reader and the value is no model output.
  auto sole_reader = [&](ValueId value) -> int {
    if (is_model_output(model, value)) return -1;
    const int c = consumer[static_cast<size_t>(value)];
    return c >= 0 && !removed[static_cast<size_t>(c)] ? c : -1;
  };

  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& anchor = nodes[i];
    if (removed[i] || !is_anchor(anchor)) continue;
    const ValueInfo& y = model.value(anchor.outputs[0]);
    if (!is_float(y.type)) continue;

    std::vector<int> absorbed;
    ValueId result = anchor.outputs[0];
    ValueId residual = no_value;
    const int next = sole_reader(result);
    if (next < 0) continue;
    const Node& add = nodes[static_cast<size_t>(next)];
    if (add.op_type == "Add" && add.inputs.size() == 2 && add.outputs.size() == 1 &&
        sum_input_index(anchor.op_type) != 0 &&
        anchor.inputs.size() <= sum_input_index(anchor.op_type)) {
      const ValueId other = add.inputs[0] == result ? add.inputs[1] : add.inputs[0];
      // Only a same-shape residual: a broadcast Add is no sum post-op.
      if (other != no_value && model.value(other).type == y.type && y.shape.is_static() &&
          model.value(other).shape == y.shape) {
        residual = other;
        absorbed.push_back(next);
        result = add.outputs[0];
      }
    }
    const int relu_index = absorbed.empty() ? next : sole_reader(result);
    if (relu_index >= 0) {
      const Node& relu = nodes[static_cast<size_t>(relu_index)];
      if (relu.op_type == "Relu" && relu.inputs.size() == 1 && relu.outputs.size() == 1 &&
          relu.inputs[0] == result) {
        absorbed.push_back(relu_index);
        result = relu.outputs[0];
      }
    }
    if (absorbed.empty()) continue;

    std::vector<std::string> merged = original_names_of(names, anchor.name);
    for (int a : absorbed) {
      const Node& node = nodes[static_cast<size_t>(a)];
      if (node.op_type == "Relu") anchor.attributes.set("fused_activation", std::string("Relu"));
      for (const std::string& n : original_names_of(names, node.name)) merged.push_back(n);
      names.erase(node.name);
      removed[static_cast<size_t>(a)] = true;
    }
    if (residual != no_value) {
      anchor.inputs.resize(sum_input_index(anchor.op_type), no_value);
      anchor.inputs.push_back(residual);
      anchor.attributes.set("fused_sum", int64_t{1});
    }
    anchor.outputs = {result};
    names[anchor.name] = std::move(merged);
    ++fused_count;
  }
  if (fused_count == 0) return 0;
  std::vector<Node> kept;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(nodes[i]));
  model.set_nodes(std::move(kept));
  model.validate();
  return fused_count;
}

}  // namespace troupe::transformations
