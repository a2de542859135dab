// QuantizingBatchNormalization: a float inference-mode normalization, Relu or no activation, and
// the QuantizeLinear after it in one pass, f32 in and u8/i8 out, with exactly the f32 steps of
// engine/ops/quantized_post_ops.hpp (so it matches the reference bit for bit). Run as written,
// DenseNet's quantized blocks wrote each normalization's f32 output and read it back to quantize
// it: the two passes were a quarter of a DenseNet-121 int8 inference on Zen 4. oneDNN 2.6's
// batch normalization has no quantized output with scales, so this is a loop: 16 lanes at a time
// with intrinsics on AVX-512, compiled for each ISA otherwise (as QLinearAdd's).
#include <algorithm>
#include <cstdint>
#include <string>

#include "engine/ops/quantized_post_ops.hpp"
#include "kernels/cpu_isa.hpp"
#include "kernels/dnnl/chunked_loop.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/int8_vectors_avx512.hpp"
#include "kernels/dnnl/quantization_params.hpp"
#include "kernels/layout_conversion.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

struct AffineParams {
  float y_scale = 1.f, y_zero = 0.f;
  bool relu = false;
};

// `n` elements; with `Along` the multiplier and offset advance with them (a channels-last row of
// channels), without it they hold for all (a plane of one channel).
template <bool Along, class Y>
[[gnu::always_inline]] inline void affine_span(const float* x, Y* y, int64_t n, const float* m,
                                               const float* o, const AffineParams& p) {
  const float y_scale = p.y_scale, y_zero = p.y_zero;
  const bool relu = p.relu;
  for (int64_t i = 0; i < n; ++i) {
    const float scaled = x[i] * m[Along ? i : 0];
    float v = scaled + o[Along ? i : 0];
    if (relu) v = v < 0.f ? 0.f : v;
    y[i] = quantize_scaled<Y>(v / y_scale, y_zero);
  }
}

template <bool Along, class Y>
[[TROUPE_AVX512_TARGET]] void affine_span_avx512(const float* x, Y* y, int64_t n, const float* m,
                                                 const float* o, const AffineParams& p) {
  const __m512 y_scale = _mm512_set1_ps(p.y_scale);
  const __m512 m_all = _mm512_set1_ps(m[0]), o_all = _mm512_set1_ps(o[0]);
  const auto requantize = avx512::Requantize::to<Y>(p.y_zero);
  int64_t i = 0;
  for (; i + avx512::lanes <= n; i += avx512::lanes) {
    const __m512 mi = Along ? _mm512_loadu_ps(m + i) : m_all;
    const __m512 oi = Along ? _mm512_loadu_ps(o + i) : o_all;
    __m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), mi), oi);
    if (p.relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
    requantize.store(y + i, _mm512_div_ps(v, y_scale));
  }
  affine_span<Along>(x + i, y + i, n - i, Along ? m + i : m, Along ? o + i : o, p);
}

// A float input in 16-channel blocks [N, C / 16, H, W, 16] (C a multiple of 16) into a
// channels-last output [N, H, W, C]: each pixel's 16 channels of a block are contiguous on both
// sides, the same steps 16 lanes at a time (DenseNet's joins are blocked, so that they are
// written in place, and its normalizations read them so).
// Units [first, first + count) of the batch's blocks (unit u: image u / blocks, block u % blocks).
template <class Y>
[[TROUPE_AVX512_TARGET]] void blocked_affine_avx512(const float* x, Y* y, int64_t first,
                                                    int64_t count, int64_t channels, int64_t pixels,
                                                    const float* m, const float* o,
                                                    const AffineParams& p) {
  constexpr int64_t block = avx512::lanes;
  const __m512 y_scale = _mm512_set1_ps(p.y_scale);
  const auto requantize = avx512::Requantize::to<Y>(p.y_zero);
  const int64_t blocks = channels / block;
  for (int64_t u = first; u < first + count; ++u) {
    const int64_t n = u / blocks, b = u % blocks;
    const float* xb = x + u * pixels * block;
    Y* yb = y + n * pixels * channels + b * block;
    const __m512 mb = _mm512_loadu_ps(m + b * block), ob = _mm512_loadu_ps(o + b * block);
    for (int64_t i = 0; i < pixels; ++i) {
      __m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(xb + i * block), mb), ob);
      if (p.relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
      requantize.store(yb + i * channels, _mm512_div_ps(v, y_scale));
    }
  }
}

[[TROUPE_AVX512_TARGET]] void blocked_affine(const float* x, bool y_u8, void* y, int64_t first,
                                             int64_t count, int64_t channels, int64_t pixels,
                                             const float* m, const float* o,
                                             const AffineParams& p) {
  y_u8 ? blocked_affine_avx512(x, static_cast<uint8_t*>(y), first, count, channels, pixels, m, o, p)
       : blocked_affine_avx512(x, static_cast<int8_t*>(y), first, count, channels, pixels, m, o, p);
}

// One span into u8 or i8, compiled per ISA and picked by the effective one.
using AffineSpan = void (*)(const float*, bool, void*, int64_t, const float*, const float*, bool,
                            const AffineParams&);

template <bool Along>
[[gnu::always_inline]] inline void span_any(const float* x, bool y_u8, void* y, int64_t n,
                                            const float* m, const float* o, const AffineParams& p) {
  if (y_u8)
    affine_span<Along>(x, static_cast<uint8_t*>(y), n, m, o, p);
  else
    affine_span<Along>(x, static_cast<int8_t*>(y), n, m, o, p);
}

[[TROUPE_AVX512_TARGET]] void span_avx512(const float* x, bool y_u8, void* y, int64_t n,
                                          const float* m, const float* o, bool along,
                                          const AffineParams& p) {
  auto* y8 = static_cast<uint8_t*>(y);
  auto* ys8 = static_cast<int8_t*>(y);
  if (along)
    y_u8 ? affine_span_avx512<true>(x, y8, n, m, o, p)
         : affine_span_avx512<true>(x, ys8, n, m, o, p);
  else
    y_u8 ? affine_span_avx512<false>(x, y8, n, m, o, p)
         : affine_span_avx512<false>(x, ys8, n, m, o, p);
}
[[gnu::target("avx2")]] void span_avx2(const float* x, bool y_u8, void* y, int64_t n,
                                       const float* m, const float* o, bool along,
                                       const AffineParams& p) {
  along ? span_any<true>(x, y_u8, y, n, m, o, p) : span_any<false>(x, y_u8, y, n, m, o, p);
}
void span_baseline(const float* x, bool y_u8, void* y, int64_t n, const float* m, const float* o,
                   bool along, const AffineParams& p) {
  along ? span_any<true>(x, y_u8, y, n, m, o, p) : span_any<false>(x, y_u8, y, n, m, o, p);
}
AffineSpan affine_span_for(const CpuIsa& isa) {
  return isa.avx512 ? span_avx512 : isa.avx2 ? span_avx2 : span_baseline;
}

class QuantizingBatchNormKernel final : public Kernel {
 public:
  explicit QuantizingBatchNormKernel(const KernelRequest& request) {
    const auto& in = request.inputs;
    const auto& c = request.constant_inputs;
    if (in.size() != 7 || request.outputs.size() != 1 || c.size() != 7 ||
        in[0].type != ElementType::f32 || !is_8bit(request.outputs[0].type) ||
        in[0].shape.rank() < 2)
      throw Unsupported{};
    for (size_t i = 1; i <= 4; ++i)
      if (!c[i]) throw Unsupported{};
    const std::string activation = fused::activation(request.node);
    if (!activation.empty() && activation != "Relu") throw Unsupported{};
    affine_ = quantized::batch_norm_affine(*c[1], *c[2], *c[3], *c[4],
                                           request.node.attributes.get_float_or("epsilon", 1e-5));
    params_.relu = activation == "Relu";
    params_.y_scale = static_cast<float>(constant_scalar(c[5]));
    params_.y_zero = static_cast<float>(constant_scalar(c[6]));
    // Any batch and spatial size (known at run time or not); the channels are the parameters'.
    rank_ = in[0].shape.rank();
    const int64_t channels = in[0].shape[1];
    if (channels != Shape::dynamic && static_cast<int64_t>(affine_.multiplier.size()) != channels)
      throw Unsupported{};
    y_u8_ = request.outputs[0].type == ElementType::u8;
    blocked_activations_ = activation_layout(request) == TensorLayout::blocked(avx512::lanes);
    x_layout_ = request.input_layout(0);
    y_layout_ = request.output_layout(0);
  }

  std::string implementation() const override { return "dnnl:loop"; }

  // Channels-last, or 16-channel blocks where the model keeps its float activations so (a block
  // is a vector: no conversion) and the output channels-last.
  TensorLayout preferred_input_layout(size_t i) const override {
    if (i != 0 || rank_ != 4) return {};
    return reads_blocks() ? TensorLayout::blocked(avx512::lanes)
                          : TensorLayout::channels_last_order();
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    return o == 0 && rank_ == 4 ? TensorLayout::channels_last_order() : TensorLayout{};
  }

  void execute(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    Tensor& y = outputs[0];
    if (y.size() == 0) return;
    const auto channels = static_cast<int64_t>(affine_.multiplier.size());
    const Shape& shape = inputs[0].shape();
    if (shape.rank() < 2 || shape[1] != channels || y.size() != inputs[0].size())
      throw ExecutionError("QuantizingBatchNormalization: input " + shape.to_string() + " for " +
                           std::to_string(channels) + " channels and an output of " +
                           std::to_string(y.size()) + " elements");
    const float* m = affine_.multiplier.data();
    const float* o = affine_.offset.data();
    if (x_layout_ == TensorLayout::blocked(avx512::lanes) &&
        y_layout_ == TensorLayout::channels_last_order() && effective_cpu_isa().avx512 &&
        shape.rank() == 4 && channels % avx512::lanes == 0) {
      const int64_t pixels = shape[2] * shape[3];
      // Units of one image's block, over the stream's threads.
      for_each_chunk_of_units(shape[0] * (channels / avx512::lanes), pixels * avx512::lanes,
                              [&](int64_t first, int64_t count) {
                                blocked_affine(inputs[0].data<float>(), y_u8_, y.raw_data(), first,
                                               count, channels, pixels, m, o, params_);
                              });
      return;
    }
    // Computed channels-last or plain; an output stored otherwise (blocked) is converted after.
    const bool direct = y_layout_.is_plain() || y_layout_.channels_last;
    const TensorLayout order = direct ? y_layout_ : TensorLayout::channels_last_order();
    const Tensor& x = in_layout(inputs[0], x_layout_, order, x_scratch_);
    if (!direct && (y_scratch_.empty() || y_scratch_.shape() != y.shape()))
      y_scratch_ = Tensor(y.element_type(), y.shape());
    Tensor& target = direct ? y : y_scratch_;
    const float* src = x.data<float>();
    auto* dst = static_cast<uint8_t*>(target.raw_data());  // u8 or i8: one byte per element
    if (order.channels_last || shape.rank() == 2) {
      // Rows of one pixel's channels, over the stream's threads.
      for_each_chunk_of_units(x.size() / channels, channels, [&](int64_t begin, int64_t count) {
        for (int64_t row = begin; row < begin + count; ++row)
          span_(src + row * channels, y_u8_, dst + row * channels, channels, m, o, true, params_);
      });
    } else {
      const int64_t inner = x.size() / (shape[0] * channels);
      for (int64_t plane = 0; plane < shape[0] * channels; ++plane) {
        const int64_t c = plane % channels;
        span_(src + plane * inner, y_u8_, dst + plane * inner, inner, m + c, o + c, false, params_);
      }
    }
    if (!direct) convert_layout(y_scratch_, order, y, y_layout_);
  }

 private:
  bool reads_blocks() const {
    return blocked_activations_ && effective_cpu_isa().avx512 &&
           affine_.multiplier.size() % avx512::lanes == 0;
  }

  quantized::ChannelAffine affine_;
  bool blocked_activations_ = false;  // the model keeps float activations in 16-channel blocks
  AffineParams params_;
  AffineSpan span_ = affine_span_for(effective_cpu_isa());
  size_t rank_ = 0;
  bool y_u8_ = true;
  TensorLayout x_layout_, y_layout_;
  Tensor x_scratch_, y_scratch_;
};

}  // namespace

void register_quantizing_batch_norm(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "QuantizingBatchNormalization",
               construct_kernel<QuantizingBatchNormKernel>);
}

}  // namespace troupe::kernels::onednn
