// A multiplication by a constant next to a Conv with constant weights is linear, so the weights
// take it: after the Conv (a scalar, or a factor per output channel: a residual branch scaled
// before its sum, ESRGAN's 0.2, NFNet's alpha)
//   Conv(x) * s[m]  =  Conv'(x)   with W'[m] = W[m] * s[m], B'[m] = B[m] * s[m],
// and before it (a scalar: NFNet's scaled activations, gamma * gelu(x), then beta * ...)
//   Conv(x * s)  =  Conv'(x)   with W' = W * s (padding reads zeros either way).
// Division by a constant is multiplication by its reciprocal; several such ops in a row fold
// together. Without this every factor is a pass over the activation of its own. It runs after the
// GELU and SiLU fusions, whose patterns hold scalar factors of their own (x * 0.5 * (1 + erf)).
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/graph/transformations/transformations.hpp"

namespace troupe::transformations {

namespace {

// The factor a Mul or Div by a constant applies to `value` (its other input; x / c only), one
// per element of that constant, if every one is finite and the result has `value`'s shape.
std::optional<std::vector<double>> constant_factor(const Model& model, const Node& op,
                                                   ValueId value) {
  const bool is_mul = is_op(op, "Mul", 2);
  const bool is_div = is_op(op, "Div", 2) && op.inputs[0] == value && op.inputs[1] != value;
  if (!is_mul && !is_div) return std::nullopt;
  const Tensor* c = f32_constant(model, other_input(op, value));
  if (!c || model.value(op.outputs[0]).shape != model.value(value).shape) return std::nullopt;
  const Tensor data = c->contiguous();
  std::vector<double> factors(static_cast<size_t>(data.size()));
  for (size_t i = 0; i < factors.size(); ++i) {
    const double f = data.data<float>()[i];
    if (!std::isfinite(f) || (is_div && f == 0.0)) return std::nullopt;
    factors[i] = is_div ? 1.0 / f : f;
  }
  return factors;
}

// Whether a constant of `shape` broadcast against [N, M, spatial...] (rank `rank`) is one factor
// per channel m: every axis 1 but the channel axis, of M.
bool per_output_channel(const Shape& shape, size_t rank, int64_t channels) {
  if (shape.rank() > rank) return false;
  const size_t offset = rank - shape.rank();
  for (size_t d = 0; d < shape.rank(); ++d) {
    const int64_t expected = d + offset == 1 ? channels : 1;
    if (shape[d] != expected) return false;
  }
  return offset <= 1;
}

// New constants for the Conv: its weights (and bias) times factor[m] per output channel, or the
// one factor for all. The old ones may be shared, so they stay.
void scale_conv(Model& model, Node& conv, const std::vector<double>& factors, bool scale_bias) {
  const Tensor w = model.constants().at(conv.inputs[1]).contiguous();
  const int64_t channels = w.shape()[0];
  const int64_t per_channel = w.size() / channels;
  auto factor = [&](int64_t m) { return factors.size() == 1 ? factors[0] : factors[m]; };
  Tensor new_w = w.clone();
  float* wd = new_w.data<float>();
  for (int64_t m = 0; m < channels; ++m)
    for (int64_t k = 0; k < per_channel; ++k)
      wd[m * per_channel + k] = static_cast<float>(wd[m * per_channel + k] * factor(m));
  conv.inputs[1] =
      model.add_constant(unique_value_name(model, conv.name + "/scaled_weights"), new_w);
  if (scale_bias && conv.inputs.size() == 3 && conv.inputs[2] != no_value) {
    Tensor new_b = model.constants().at(conv.inputs[2]).contiguous().clone();
    float* bd = new_b.data<float>();
    for (int64_t m = 0; m < channels; ++m) bd[m] = static_cast<float>(bd[m] * factor(m));
    conv.inputs[2] =
        model.add_constant(unique_value_name(model, conv.name + "/scaled_bias"), new_b);
  }
}

// The Mul or Div by a scalar constant that computes `value` from x and is read by `reader`
// alone: x and the factor.
std::optional<std::pair<ValueId, double>> scalar_step_into(const Model& model, Rewrite& rewrite,
                                                           ValueId value, int reader) {
  const int op_index = rewrite.producer(value);
  if (op_index < 0 || rewrite.sole_reader(value) != reader) return std::nullopt;
  const Node& op = rewrite.node(op_index);
  for (size_t side = 0; side < 2 && op.inputs.size() == 2; ++side) {
    const ValueId x = op.inputs[side];
    if (x == no_value || model.is_constant(x) || model.value(x).type != ElementType::f32) continue;
    const auto factors = constant_factor(model, op, x);
    if (factors && factors->size() == 1) return std::make_pair(x, (*factors)[0]);
  }
  return std::nullopt;
}

}  // namespace

size_t fold_scales_into_conv(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    const int conv_index = static_cast<int>(i);
    if (rewrite.removed(conv_index) || !conv_with_constant_weights(model, rewrite.node(conv_index)))
      continue;
    const int64_t channels = model.constants().at(rewrite.node(conv_index).inputs[1]).shape()[0];
    // After: the Conv's output times factors per output channel, one op after another.
    std::vector<double> after{1.0};
    std::vector<int> absorbed;
    for (ValueId y = rewrite.node(conv_index).outputs[0];;) {
      const int op_index = rewrite.sole_reader(y);
      if (op_index < 0) break;
      const Node& op = rewrite.node(op_index);
      const auto factors = constant_factor(model, op, y);
      if (!factors ||
          (factors->size() != 1 && !per_output_channel(model.value(other_input(op, y)).shape,
                                                       model.value(y).shape.rank(), channels)))
        break;
      if (factors->size() > after.size()) after.resize(factors->size(), after[0]);
      for (size_t m = 0; m < after.size(); ++m)
        after[m] *= factors->size() == 1 ? (*factors)[0] : (*factors)[m];
      absorbed.push_back(op_index);
      y = op.outputs[0];
    }
    Node& conv = rewrite.node(conv_index);
    if (!absorbed.empty()) {
      scale_conv(model, conv, after, true);
      conv.outputs = rewrite.node(absorbed.back()).outputs;
      rewrite.update_producer(conv_index);
      rewrite.absorb(conv.name, absorbed);
    }
    // Before: the Conv reads x times scalars, each product read by the next step alone.
    double before = 1.0;
    std::vector<int> steps;
    ValueId x = conv.inputs[0];
    for (int reader = conv_index;;) {
      const auto step = scalar_step_into(model, rewrite, x, reader);
      if (!step) break;
      reader = rewrite.producer(x);
      steps.push_back(reader);
      x = step->first;
      before *= step->second;
    }
    if (steps.empty()) continue;
    scale_conv(model, conv, {before}, false);
    conv.inputs[0] = x;
    rewrite.absorb(conv.name, steps);
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
