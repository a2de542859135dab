#pragma once

// When the int8 kernels compute exactly what the quantized op specifies. Without VNNI, oneDNN's
// int8 convolutions and matmuls multiply u8 activations by s8 weights with vpmaddubsw, which adds
// two products in 16 bits and saturates once 255 * (|w_a| + |w_b|) exceeds 32767; torch's and
// ONNX Runtime's quantizers write weights in [-128, 127] unless told to keep them in 7 bits, and
// real layers do hit it (MobileNetV2's pointwise weights pair up to 247). With s8 activations
// oneDNN halves the weights instead, losing their last bit. So without VNNI only u8 activations
// with 7-bit weights (|w| <= 64, any two of them summing to at most 128) are exact, and
// depthwise convolutions, whose kernel widens to 32 bits before multiplying. With VNNI
// (vpdpbusd accumulates in 32 bits) everything is.
#include <cstdint>
#include <cstdlib>

#include "kernels/cpu_isa.hpp"
#include "troupe/tensor.hpp"

namespace troupe::kernels {

/// Whether a quantized product with activations of `activation_type` and the s8 `weights` runs
/// exactly on this CPU's int8 kernels; `depthwise` for a convolution with one input channel per
/// group.
inline bool int8_product_is_exact(ElementType activation_type, const Tensor& weights,
                                  bool depthwise) {
  if (effective_cpu_isa().vnni) return true;
  if (activation_type != ElementType::u8) return false;
  if (depthwise) return true;
  const Tensor dense = weights.contiguous();
  const int8_t* w = dense.data<int8_t>();
  for (int64_t i = 0; i < dense.size(); ++i)
    if (std::abs(static_cast<int>(w[i])) > 64) return false;
  return true;
}

/// Whether running the product on the int8 kernels is exact (above) and faster than its float
/// form on this CPU: without VNNI oneDNN 2.6's int8 depthwise kernel widens every product to 32
/// bits and runs about 3x slower than its f32 one (MobileNetV2's 3x3 depthwise layers on AVX2).
/// The QDQ fusion asks this; the kernels themselves only refuse what is not exact.
inline bool int8_product_pays(ElementType activation_type, const Tensor& weights, bool depthwise) {
  return int8_product_is_exact(activation_type, weights, depthwise) &&
         (effective_cpu_isa().vnni || !depthwise);
}

}  // namespace troupe::kernels
