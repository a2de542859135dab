#include "kernels/dnnl/quantization_params.hpp"

#include <cmath>

#include "kernels/layout_conversion.hpp"

namespace troupe::kernels::onednn {

namespace {

const Tensor& required_constant(const std::vector<const Tensor*>& constants, size_t i) {
  if (i >= constants.size() || constants[i] == nullptr) throw Unsupported{};
  return *constants[i];
}

double scalar(const std::vector<const Tensor*>& constants, size_t i) {
  return constant_scalar(&required_constant(constants, i));
}

int32_t zero_point(const std::vector<const Tensor*>& constants, size_t i) {
  return static_cast<int32_t>(scalar(constants, i));
}

}  // namespace

double constant_scalar(const Tensor* t) {
  if (t == nullptr || t->size() != 1) throw Unsupported{};
  return t->value_at(0);
}

const Tensor& in_layout(const Tensor& t, TensorLayout layout, TensorLayout target,
                        Tensor& scratch) {
  if (layout.same_order(target)) return t;
  if (scratch.empty() || scratch.shape() != t.shape())
    scratch = Tensor(t.element_type(), t.shape());
  convert_layout(t, layout, scratch, target);
  return scratch;
}

QuantizedProductParams read_quantized_params(const Node& node,
                                             const std::vector<const Tensor*>& constants) {
  QuantizedProductParams p;
  p.x_scale = scalar(constants, 1);
  p.x_zero_point = zero_point(constants, 2);
  const Tensor& w_scale = required_constant(constants, 4);
  for (int64_t i = 0; i < w_scale.size(); ++i) p.w_scales.push_back(w_scale.value_at(i));
  const Tensor& w_zero = required_constant(constants, 5);
  for (int64_t i = 0; i < w_zero.size(); ++i)
    if (w_zero.value_at(i) != 0.0) throw Unsupported{};  // oneDNN's int8 weights are symmetric
  if (!quantized::has_float_output(node)) {  // else y is the real value: scale 1, zero point 0
    p.y_scale = scalar(constants, 6);
    p.y_zero_point = zero_point(constants, 7);
  }
  p.sum = fused::has_sum(node);
  if (p.sum) {
    const size_t r = quantized::plain_inputs(node);
    p.r_scale = scalar(constants, r + 1);
    p.r_zero_point = zero_point(constants, r + 2);
  }
  const std::string activation = fused::activation(node);
  p.scale_before_activation =
      activation.empty() || activation == "Relu" || activation == "LeakyRelu";
  for (double s : p.w_scales)
    if (!(s > 0.0) || !std::isfinite(s)) throw Unsupported{};
  if (!(p.x_scale > 0.0) || !(p.y_scale > 0.0) || !(p.r_scale > 0.0)) throw Unsupported{};
  return p;
}

std::vector<float> QuantizedProductParams::output_scales() const {
  const double divisor = scale_before_activation ? y_scale : 1.0;
  std::vector<float> scales;
  for (double w : w_scales) scales.push_back(static_cast<float>(x_scale * w / divisor));
  return scales;
}

float QuantizedProductParams::sum_scale() const {
  return static_cast<float>(scale_before_activation ? r_scale / y_scale : r_scale);
}

float QuantizedProductParams::activation_scale() const {
  return scale_before_activation ? 1.f : static_cast<float>(1.0 / y_scale);
}

ZeroPointMemory::ZeroPointMemory(int32_t value) : value_(std::make_shared<int32_t>(value)) {
  memory_ = dnnl::memory(plain_desc({1}, dnnl::memory::data_type::s32), cpu_engine(), value_.get());
}

}  // namespace troupe::kernels::onednn
