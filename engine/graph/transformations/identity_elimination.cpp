// Removes nodes that pass their input through unchanged: Identity, a Dropout in inference mode or
// with a ratio of 0 (its mask output unused), and a Cast to the type its input already has
// (PyTorch 1.13 writes one between every QuantizeLinear and DequantizeLinear of a quantized model,
// hiding the pair from pattern matching), and data movements that move nothing: a Slice keeping
// every element (a GhostNet module concatenates two halves and slices the concatenation back to
// its width, which is all of it whenever the width is even: 32 copies per image), a Transpose by
// the identity permutation, a Reshape to the static shape it had, a Split into one part and a
// Concat of one input. Their readers read the input
// instead; a node writing a model output stays, as the output keeps its value and name.
#include <optional>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/transformations.hpp"

namespace troupe::transformations {

namespace {

// Whether a Dropout passes its input through: in inference mode (no training_mode input, opset
// 12+, or a constant false one) or with a constant ratio of 0 (PyTorch exports a model's
// attention dropout of 0 as training_mode true when the model was in training mode).
bool identity_dropout(const Model& model, const Node& node) {
  auto constant_scalar = [&](size_t i) -> const Tensor* {
    if (i >= node.inputs.size() || node.inputs[i] == no_value || !model.is_constant(node.inputs[i]))
      return nullptr;
    const Tensor& t = model.constants().at(node.inputs[i]);
    return t.size() == 1 ? &t : nullptr;
  };
  const bool no_mode = node.inputs.size() < 3 || node.inputs[2] == no_value;
  if (no_mode && node.attributes.get_int_or("training_mode", 0) == 0) return true;
  const Tensor* mode = constant_scalar(2);
  if (mode && mode->value_at(0) == 0) return true;
  const Tensor* ratio = constant_scalar(1);
  return ratio && ratio->value_at(0) == 0;
}

// Whether a Slice keeps all of its input: on every sliced axis (of static size) from the start
// to the end in steps of 1, its bounds clamped as Slice clamps them.
bool keeps_everything(const Model& model, const Node& node) {
  const Shape& shape = model.value(node.inputs[0]).shape;
  const std::optional<SliceParameters> p = slice_parameters(model, node);
  if (!p || shape.rank() == 0) return false;
  const auto rank = static_cast<int64_t>(shape.rank());
  for (size_t k = 0; k < p->starts.size(); ++k) {
    int64_t axis = p->axes.empty() ? static_cast<int64_t>(k) : p->axes[k];
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return false;
    const int64_t dim = shape[static_cast<size_t>(axis)];
    if (dim == Shape::dynamic || (!p->steps.empty() && p->steps[k] != 1)) return false;
    int64_t start = p->starts[k], end = p->ends[k];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    if (start > 0 || end < dim) return false;
  }
  return true;
}

bool identity_permutation(const Node& node, size_t rank) {
  const std::vector<int64_t> perm = node.attributes.get_ints_or("perm", {});
  if (perm.size() != rank) return false;  // no perm reverses the axes
  for (size_t i = 0; i < rank; ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

bool passes_through(const Model& model, const Node& node, const std::vector<bool>& read) {
  if (node.inputs.empty() || node.inputs[0] == no_value || node.outputs.empty() ||
      is_model_output(model, node.outputs[0]))
    return false;
  if (node.op_type == "Dropout") {
    // The mask output, if any, must go unused: in inference it would be all true.
    const bool mask_used =
        node.outputs.size() > 1 && node.outputs[1] != no_value &&
        (read[static_cast<size_t>(node.outputs[1])] || is_model_output(model, node.outputs[1]));
    return node.outputs.size() <= 2 && !mask_used && identity_dropout(model, node);
  }
  if (node.outputs.size() != 1) return false;
  if (node.op_type == "Identity") return true;
  const ValueInfo& in = model.value(node.inputs[0]);
  const ValueInfo& out = model.value(node.outputs[0]);
  if (in.type != out.type || in.type == ElementType::undefined) return false;
  if (node.op_type == "Cast") return true;
  if (node.op_type == "Slice") return keeps_everything(model, node);
  if (node.op_type == "Transpose") return identity_permutation(node, in.shape.rank());
  if (node.op_type == "Reshape") return in.shape.is_static() && in.shape == out.shape;
  // torch.split into one chunk and torch.cat of a single tensor (MixNet's mixed convolution
  // with one kernel size) copy their input whole.
  if (node.op_type == "Split") return in.shape.is_static() && in.shape == out.shape;
  if (node.op_type == "Concat") return node.inputs.size() == 1;
  return false;
}

}  // namespace

size_t eliminate_identities(Model& model) {
  std::vector<bool> read(model.values().size(), false);
  for (const Node& node : model.nodes())
    for (ValueId in : node.inputs)
      if (in != no_value) read[static_cast<size_t>(in)] = true;
  std::vector<ValueId> source(model.values().size());
  for (size_t v = 0; v < source.size(); ++v) source[v] = static_cast<ValueId>(v);
  std::vector<Node> kept;
  size_t removed = 0;
  for (const Node& node : model.nodes()) {
    if (passes_through(model, node, read)) {
      source[static_cast<size_t>(node.outputs[0])] = source[static_cast<size_t>(node.inputs[0])];
      ++removed;
      continue;
    }
    Node rewired = node;
    for (ValueId& in : rewired.inputs)
      if (in != no_value) in = source[static_cast<size_t>(in)];
    kept.push_back(std::move(rewired));
  }
  if (removed == 0) return 0;
  model.set_nodes(std::move(kept));
  model.validate();
  return removed;
}

}  // namespace troupe::transformations
