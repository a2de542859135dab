// Fuses Conv / MatMul / Gemm with the residual Add and the activation (Relu, LeakyRelu, Clip,
// Sigmoid, Tanh, HardSwish, Gelu, Swish) that follow it into one node, so that the fast backend
// applies them as post-ops while the result is still in cache; likewise an inference-mode
// BatchNormalization that no convolution absorbed (DenseNet's and pre-activation blocks' BN ->
// ReLU -> Conv) with the Relu after it, which oneDNN's normalization applies in the same pass. The
// fused node keeps the anchor's name and op type and takes over the last absorbed node's output
// value.
#include <optional>
#include <string>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/graph/transformations/transformations.hpp"
#include "engine/ops/fused_post_ops.hpp"

namespace troupe::transformations {

namespace {

// Index of the residual input of a fused sum: after the inputs of the unfused op (and MatMul's
// fused bias). Gemm takes no residual (its C is already an addend; see kernels/dnnl/matmul.cpp).
size_t sum_input_index(const Node& node) {
  if (node.op_type == "Conv") return 3;
  if (node.op_type == "MatMul") return fused::sum_input(node, 2);
  return 0;
}

// An inference-mode BatchNormalization takes a Relu and nothing else: the activation oneDNN's
// normalization fuses (any other would send the node to the reference kernel).
bool is_batch_norm(const Node& node) {
  return node.op_type == "BatchNormalization" && node.inputs.size() == 5 &&
         node.attributes.get_int_or("training_mode", 0) == 0;
}

// MatMul may already carry a fused bias and scale: they precede the sum and the activation.
bool is_anchor(const Node& node) {
  return (node.op_type == "Conv" || node.op_type == "MatMul" || node.op_type == "Gemm" ||
          is_batch_norm(node)) &&
         node.outputs.size() == 1 && !fused::has_sum_or_activation(node);
}

bool same_shape_but_batch(const Shape& a, const Shape& b) {
  if (a != b || a.rank() == 0) return false;
  for (size_t i = 1; i < a.rank(); ++i)
    if (a[i] == Shape::dynamic) return false;
  return true;
}

bool is_float(ElementType type) {
  return type == ElementType::f32 || type == ElementType::f64;
}

}  // namespace

// The fused_activation attributes that stand for `node` applied to `input`, or nullopt when it
// is no activation the fused contract has (engine/ops/fused_post_ops.hpp).
std::optional<Attributes> fused_activation_of(const Model& model, const Node& node, ValueId input) {
  if (node.outputs.size() != 1 || node.inputs.empty() || node.inputs[0] != input)
    return std::nullopt;
  Attributes a;
  const std::string& op = node.op_type;
  if (node.inputs.size() == 1) {
    if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "HardSwish" || op == "Mish") {
      a.set("fused_activation", op);
      return a;
    }
    if (op == "LeakyRelu" || op == "Swish") {
      a.set("fused_activation", op);
      a.set("fused_activation_alpha",
            node.attributes.get_float_or("alpha", op == "LeakyRelu" ? 0.01 : 1.0));
      return a;
    }
    if (op == "Gelu") {
      const std::string approximate = node.attributes.get_string_or("approximate", "none");
      if (approximate != "none" && approximate != "tanh") return std::nullopt;
      a.set("fused_activation", std::string(approximate == "none" ? "Gelu" : "GeluTanh"));
      return a;
    }
  }
  // PReLU with one slope for every channel (torch's nn.PReLU() default) is a LeakyReLU.
  if (op == "PRelu" && node.inputs.size() == 2) {
    const std::optional<double> slope = f32_scalar(model, node.inputs[1]);
    if (!slope || model.value(node.inputs[1]).shape.rank() > model.value(input).shape.rank())
      return std::nullopt;
    a.set("fused_activation", std::string("LeakyRelu"));
    a.set("fused_activation_alpha", *slope);
    return a;
  }
  if (op == "Clip" && node.inputs.size() <= 3) {
    // Bounds are attributes before opset 11 and optional constant scalar inputs since.
    a.set("fused_activation", op);
    const char* bound_attribute[] = {"min", "max"};
    const char* fused_attribute[] = {"fused_activation_alpha", "fused_activation_beta"};
    for (size_t i = 0; i < 2; ++i) {
      if (node.attributes.has(bound_attribute[i]))
        a.set(fused_attribute[i], node.attributes.get_float(bound_attribute[i]));
      const size_t input = i + 1;
      if (input < node.inputs.size() && node.inputs[input] != no_value) {
        const std::optional<double> bound = f32_scalar(model, node.inputs[input]);
        if (!bound) return std::nullopt;  // a bound computed at run time
        a.set(fused_attribute[i], *bound);
      }
    }
    return a;
  }
  return std::nullopt;
}

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
        sum_input_index(anchor) != 0 && anchor.inputs.size() <= sum_input_index(anchor)) {
      const ValueId other = add.inputs[0] == result ? add.inputs[1] : add.inputs[0];
      // Only a same-shape residual: a broadcast Add is no sum post-op. A dynamic batch (dimension
      // 0 of both) is taken to be the same batch, as in every exported residual block; a run
      // whose batches differ is refused by validation when the stream specializes the shapes.
      if (other != no_value && model.value(other).type == y.type &&
          same_shape_but_batch(model.value(other).shape, y.shape)) {
        residual = other;
        absorbed.push_back(next);
        result = add.outputs[0];
      }
    }
    const int activation_index = absorbed.empty() ? next : sole_reader(result);
    std::optional<Attributes> activation;
    if (activation_index >= 0) {
      const Node& node = nodes[static_cast<size_t>(activation_index)];
      activation = fused_activation_of(model, node, result);
      if (activation && is_batch_norm(anchor) && node.op_type != "Relu") activation.reset();
      // The fused activation computes in the output's type: no type-changing op.
      if (activation && model.value(node.outputs[0]).type == y.type &&
          model.value(node.outputs[0]).shape == model.value(result).shape) {
        absorbed.push_back(activation_index);
        result = node.outputs[0];
      } else {
        activation.reset();
      }
    }
    if (absorbed.empty()) continue;

    if (activation)
      for (const auto& [key, value] : activation->all()) anchor.attributes.set(key, value);
    std::vector<std::string> merged = original_names_of(names, anchor.name);
    for (int a : absorbed) {
      const Node& node = nodes[static_cast<size_t>(a)];
      for (const std::string& n : original_names_of(names, node.name)) merged.push_back(n);
      names.erase(node.name);
      removed[static_cast<size_t>(a)] = true;
    }
    if (residual != no_value) {
      anchor.inputs.resize(sum_input_index(anchor), no_value);
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
