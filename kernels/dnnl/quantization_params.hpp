#pragma once

// The constant quantization parameters of a QLinearConv/QLinearMatMul node as the int8 kernels
// hand them to oneDNN: output scales folded per output channel, zero points as the runtime s32
// memories oneDNN 2.6's jit int8 kernels take.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/ops/quantized_post_ops.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"

namespace troupe::kernels::onednn {

/// Whether `type` is an 8-bit integer type of quantized activations (u8, i8).
inline bool is_8bit(ElementType type) {
  return type == ElementType::u8 || type == ElementType::i8;
}

/// The value of a constant one-element tensor (a scale, a zero point); throws Unsupported when
/// `t` is no constant or has more elements.
double constant_scalar(const Tensor* t);

/// Rounds to the nearest integer, ties to even, for |v| < 2^22 (callers clamp first): adding and
/// subtracting 1.5 * 2^23 leaves the float rounded in the current (nearest-even) mode, in a form
/// the compiler vectorizes where nearbyint would stay scalar.
inline float round_even(float v) {
  constexpr float magic = 12582912.f;
  return (v + magic) - magic;
}

/// QuantizeLinear's steps after the division by the scale, into u8 or i8: clamp (before
/// rounding: the same integer, and within round_even's range), round half to even, add the zero
/// point, saturate. Inlined into the vectorized loops of QLinearAdd and QLinearConcat; the
/// saturation is on integers, which compilers vectorize without a range check per lane.
template <class Y>
[[gnu::always_inline]] inline Y quantize_scaled(float q, float zero) {
  constexpr int32_t low = std::is_same_v<Y, uint8_t> ? 0 : -128;
  constexpr int32_t high = std::is_same_v<Y, uint8_t> ? 255 : 127;
  q = std::min(std::max(q, static_cast<float>(low) - zero - 1.f),
               static_cast<float>(high) - zero + 1.f);
  const int32_t shifted = static_cast<int32_t>(round_even(q)) + static_cast<int32_t>(zero);
  return static_cast<Y>(std::min(std::max(shifted, low), high));
}

/// `t`, stored in `layout`, as stored in `target`: itself when the orders agree, else converted
/// into `scratch` (allocated on first use).
const Tensor& in_layout(const Tensor& t, TensorLayout layout, TensorLayout target, Tensor& scratch);

/// What the kernels need of a quantized product's parameters, read from constant inputs.
struct QuantizedProductParams {
  double x_scale = 1.0;
  int32_t x_zero_point = 0;
  std::vector<double> w_scales;  // one, or one per output channel
  double y_scale = 1.0;
  int32_t y_zero_point = 0;
  bool sum = false;  // fused residual
  double r_scale = 1.0;
  int32_t r_zero_point = 0;
  /// Whether the fused activation commutes with a positive scale (Relu, LeakyRelu): then the
  /// division by y_scale folds into the output scales instead of following the activation.
  bool scale_before_activation = true;

  /// Output scales oneDNN applies to the int32 accumulator: x_scale * w_scale[m], divided by
  /// y_scale unless the activation must see real values.
  std::vector<float> output_scales() const;
  /// The scale of the sum post-op (the residual's, in the same units as the output scales).
  float sum_scale() const;
  /// The eltwise post-op's scale: 1 / y_scale when the activation sees real values, else 1.
  float activation_scale() const;
};

/// Reads the parameters from the node's constant inputs at indices `x_scale`, `x_zero_point`,
/// `w_scale`, `w_zero_point`, `y_scale`, `y_zero_point` (and the residual's after the plain
/// inputs); throws Unsupported when one is not a constant or the weights' zero point is not 0.
QuantizedProductParams read_quantized_params(const Node& node,
                                             const std::vector<const Tensor*>& constants);

/// A runtime s32 zero point as oneDNN takes it: one-element memory owning its value.
class ZeroPointMemory {
 public:
  ZeroPointMemory() = default;
  explicit ZeroPointMemory(int32_t value);
  const dnnl::memory& memory() const { return memory_; }

 private:
  std::shared_ptr<int32_t> value_;
  dnnl::memory memory_;
};

}  // namespace troupe::kernels::onednn
