// QuantizeLinear (f32 -> u8/s8) and DequantizeLinear (u8/s8 -> f32) with constant per-tensor
// parameters as one oneDNN reorder each: the scale is the reorder's output scale, the zero point
// its destination (or source) zero point. A reorder also converts layouts, so the kernels read and
// write channels-last where their neighbours keep int8 activations that way.
//
// The reorder multiplies by 1 / scale where ONNX divides by the scale: the two round the same way
// except within an ulp of a tie, so a quantized value may differ from the reference's by one step
// there.
//
// With AVX-512 an element-wise loop runs instead, the reference's own f32 steps: oneDNN 2.6's
// reorder with a zero point runs its generic `jit:uni` kernel at about 0.8 ns per element on Zen 4
// (a quarter of a quantized ShuffleNetV2's time went to such conversions), the loop at a fifth of
// that. Where both sides keep one layout it is all; from channels-last integers to 16-channel
// float blocks (or back) it runs a block's 16 channels of each pixel, contiguous on both sides; a
// plain 3-channel float tensor quantized into channels-last (a model's RGB image input) is
// interleaved by permutes; any other conversion is the loop in the integer side's order and a
// plain f32 reorder (which moves values and changes none).
#include <algorithm>
#include <vector>

#include "kernels/cpu_isa.hpp"
#include "kernels/dnnl/chunked_loop.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/int8_vectors_avx512.hpp"
#include "kernels/dnnl/quantization_params.hpp"

namespace troupe::kernels::onednn {

namespace {

struct LinearParams {
  float scale = 1.f;  // ONNX's: DequantizeLinear multiplies by it, QuantizeLinear divides
  int32_t zero = 0;
};

template <class X>
[[gnu::always_inline]] inline void dequantize_span(const X* x, float* y, int64_t n,
                                                   const LinearParams& p) {
  const float scale = p.scale;
  const int32_t zero = p.zero;
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zero) * scale;
}

template <class Y>
[[gnu::always_inline]] inline void quantize_span(const float* x, Y* y, int64_t n,
                                                 const LinearParams& p) {
  const float scale = p.scale, zero = static_cast<float>(p.zero);
  for (int64_t i = 0; i < n; ++i) y[i] = quantize_scaled<Y>(x[i] / scale, zero);
}

template <class X>
[[TROUPE_AVX512_TARGET]] void dequantize_avx512(const X* x, float* y, int64_t n,
                                                const LinearParams& p) {
  const __m512 scale = _mm512_set1_ps(p.scale);
  const __m512i zero = _mm512_set1_epi32(p.zero);
  int64_t i = 0;
  for (; i + avx512::lanes <= n; i += avx512::lanes)
    _mm512_storeu_ps(y + i, avx512::dequantize(x + i, zero, scale));
  dequantize_span(x + i, y + i, n - i, p);
}

template <class Y>
[[TROUPE_AVX512_TARGET]] void quantize_avx512(const float* x, Y* y, int64_t n,
                                              const LinearParams& p) {
  const __m512 scale = _mm512_set1_ps(p.scale);
  const auto requantize = avx512::Requantize::to<Y>(static_cast<float>(p.zero));
  int64_t i = 0;
  for (; i + avx512::lanes <= n; i += avx512::lanes)
    requantize.store(y + i, _mm512_div_ps(_mm512_loadu_ps(x + i), scale));
  quantize_span(x + i, y + i, n - i, p);
}

// QuantizeLinear of a plain [batch, 3, pixels...] tensor (an RGB image) into channels-last:
// each 16 pixels' three channel vectors interleaved by permutes into three vectors of RGB
// triples, then quantized and stored as 48 contiguous values. (A byte-by-byte transpose of a
// quantized tile took 1.7x the reorder's time.)
template <class Y>
[[TROUPE_AVX512_TARGET]] void quantize_rgb_to_channels_last_avx512(const float* x, Y* y,
                                                                   int64_t batch, int64_t pixels,
                                                                   const LinearParams& p) {
  constexpr int64_t lanes = avx512::lanes;
  const __m512 scale = _mm512_set1_ps(p.scale);
  const auto requantize = avx512::Requantize::to<Y>(static_cast<float>(p.zero));
  // Output vector v, lane l holds element 16v + l of the interleaved row: pixel (16v + l) / 3,
  // channel (16v + l) % 3. red_green picks red (index < 16) or green (16 + pixel) lanes; blue
  // lanes are then taken under `blue` from the blue vector.
  __m512i red_green[3], blue_pixel[3];
  __mmask16 blue[3];
  for (int v = 0; v < 3; ++v) {
    alignas(64) int32_t rg[lanes], b[lanes];
    __mmask16 mask = 0;
    for (int l = 0; l < lanes; ++l) {
      const int g = 16 * v + l, pixel = g / 3, channel = g % 3;
      rg[l] = channel == 1 ? 16 + pixel : pixel;
      b[l] = pixel;
      if (channel == 2) mask = static_cast<__mmask16>(mask | (1u << l));
    }
    red_green[v] = _mm512_load_si512(rg);
    blue_pixel[v] = _mm512_load_si512(b);
    blue[v] = mask;
  }
  for (int64_t n = 0; n < batch; ++n) {
    const float* r = x + n * 3 * pixels;
    const float* g = r + pixels;
    const float* b = g + pixels;
    Y* yn = y + n * 3 * pixels;
    int64_t p0 = 0;
    for (; p0 + lanes <= pixels; p0 += lanes) {
      const __m512 rv = _mm512_loadu_ps(r + p0), gv = _mm512_loadu_ps(g + p0),
                   bv = _mm512_loadu_ps(b + p0);
      for (int v = 0; v < 3; ++v) {
        const __m512 rgv = _mm512_permutex2var_ps(rv, red_green[v], gv);
        const __m512 rgb = _mm512_mask_permutexvar_ps(rgv, blue[v], blue_pixel[v], bv);
        requantize.store(yn + 3 * p0 + lanes * v, _mm512_div_ps(rgb, scale));
      }
    }
    for (; p0 < pixels; ++p0)
      for (int64_t c = 0; c < 3; ++c) quantize_span(r + c * pixels + p0, yn + p0 * 3 + c, 1, p);
  }
}

// Between an integer side channels-last [N, H, W, C] and a float side in 16-channel blocks
// [N, C / 16, H, W, 16] (C a multiple of 16): each pixel's 16 channels of a block are 16
// contiguous values on both sides, so the loop's steps run on them as they are, no transpose.
// (Units [first, first + count) of the batch's blocks: unit u is image u / blocks, block
// u % blocks.)
template <class Q>
[[TROUPE_AVX512_TARGET]] void blocked_linear_avx512(bool quantize, Q* integer, float* real,
                                                    int64_t first, int64_t count, int64_t channels,
                                                    int64_t pixels, const LinearParams& p) {
  constexpr int64_t block = avx512::lanes;
  const __m512 scale = _mm512_set1_ps(p.scale);
  const __m512i zero = _mm512_set1_epi32(p.zero);
  const auto requantize = avx512::Requantize::to<Q>(static_cast<float>(p.zero));
  const int64_t blocks = channels / block;
  for (int64_t u = first; u < first + count; ++u) {
    const int64_t n = u / blocks, b = u % blocks;
    Q* q = integer + n * pixels * channels + b * block;
    float* r = real + u * pixels * block;
    if (quantize)
      for (int64_t i = 0; i < pixels; ++i)
        requantize.store(q + i * channels, _mm512_div_ps(_mm512_loadu_ps(r + i * block), scale));
    else
      for (int64_t i = 0; i < pixels; ++i)
        _mm512_storeu_ps(r + i * block, avx512::dequantize(q + i * channels, zero, scale));
  }
}

[[TROUPE_AVX512_TARGET]] void blocked_linear(bool quantize, bool u8, void* integer, float* real,
                                             int64_t first, int64_t count, int64_t channels,
                                             int64_t pixels, const LinearParams& p) {
  u8 ? blocked_linear_avx512(quantize, static_cast<uint8_t*>(integer), real, first, count, channels,
                             pixels, p)
     : blocked_linear_avx512(quantize, static_cast<int8_t*>(integer), real, first, count, channels,
                             pixels, p);
}

// QuantizeLinear (`quantize`) or DequantizeLinear of `n` elements, the integer side u8 or i8.
[[TROUPE_AVX512_TARGET]] void linear_avx512(bool quantize, bool u8, const void* in, void* out,
                                            int64_t n, const LinearParams& p) {
  const auto* f = static_cast<const float*>(in);
  if (quantize)
    u8 ? quantize_avx512(f, static_cast<uint8_t*>(out), n, p)
       : quantize_avx512(f, static_cast<int8_t*>(out), n, p);
  else
    u8 ? dequantize_avx512(static_cast<const uint8_t*>(in), static_cast<float*>(out), n, p)
       : dequantize_avx512(static_cast<const int8_t*>(in), static_cast<float*>(out), n, p);
}

[[TROUPE_AVX512_TARGET]] void quantize_rgb_to_channels_last(bool u8, const float* x, void* y,
                                                            int64_t batch, int64_t pixels,
                                                            const LinearParams& p) {
  u8 ? quantize_rgb_to_channels_last_avx512(x, static_cast<uint8_t*>(y), batch, pixels, p)
     : quantize_rgb_to_channels_last_avx512(x, static_cast<int8_t*>(y), batch, pixels, p);
}

class LinearQuantizationKernel final : public DnnlKernel {
 public:
  explicit LinearQuantizationKernel(const KernelRequest& request) : DnnlKernel(request) {
    quantize_ = request.node.op_type == "QuantizeLinear";
    const ElementType in = request.inputs.at(0).type;
    const ElementType out = request.outputs.at(0).type;
    if (quantize_ ? (in != ElementType::f32 || !is_8bit(out))
                  : (!is_8bit(in) || out != ElementType::f32))
      throw Unsupported{};
    const Tensor* scale = constant(1);
    if (scale == nullptr || scale->size() != 1 || !(scale->value_at(0) > 0.0)) throw Unsupported{};
    int32_t zero_point = 0;
    if (has_input(2)) {
      const Tensor* zero = constant(2);
      if (zero == nullptr || zero->size() != 1) throw Unsupported{};
      zero_point = static_cast<int32_t>(zero->value_at(0));
    }
    scale_ = static_cast<float>(quantize_ ? 1.0 / scale->value_at(0) : scale->value_at(0));
    loop_params_ = {static_cast<float>(scale->value_at(0)), zero_point};
    u8_ = (quantize_ ? out : in) == ElementType::u8;
    zero_point_ = ZeroPointMemory(zero_point);
    src_type_ = *to_dnnl(in);
    dst_type_ = *to_dnnl(out);
    rank_ = request.inputs[0].shape.rank();
  }

  // The integer side channels-last, as the int8 kernels keep it; the float side in the layout
  // the float convolutions keep activations in (a layer left in float form reads its
  // dequantized input and writes the value to quantize that way): the one reorder converts both.
  TensorLayout preferred_input_layout(size_t i) const override {
    if (i != 0 || rank_ != 4) return {};
    return quantize_ ? activation_layout() : TensorLayout::channels_last_order();
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    if (o != 0 || rank_ != 4) return {};
    return quantize_ ? TensorLayout::channels_last_order() : activation_layout();
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const Dims dims = to_dims(inputs[0]);
    if (to_dims(outputs[0]) != dims) return false;
    // The loop is measured faster than the reorder with AVX-512 only; elsewhere the reorder runs.
    if (effective_cpu_isa().avx512 && input_layout(0).same_order(output_layout(0)) &&
        !input_layout(0).bf16 && !output_layout(0).bf16) {
      path_ = Path::same_layout_loop;
      set_impl("loop");
      return true;
    }
    if (effective_cpu_isa().avx512 && quantize_ && dims.size() >= 3 && dims[1] == 3 &&
        input_layout(0).is_plain() &&
        output_layout(0).same_order(TensorLayout::channels_last_order()) &&
        !output_layout(0).bf16) {
      path_ = Path::rgb_loop;
      set_impl("loop");
      return true;
    }
    const bool layout_capable = dims.size() >= 3 && dims.size() <= 5;
    const TensorLayout float_side = quantize_ ? input_layout(0) : output_layout(0);
    const TensorLayout integer_side = quantize_ ? output_layout(0) : input_layout(0);
    if (effective_cpu_isa().avx512 && dims.size() == 4 && dims[1] % avx512::lanes == 0 &&
        integer_side == TensorLayout::channels_last_order() &&
        float_side == TensorLayout::blocked(avx512::lanes)) {
      path_ = Path::blocked_loop;
      set_impl("loop");
      return true;
    }
    // Between two layouts (the integer side channels-last, the float side plain or blocked, as
    // around ShuffleNet's channel shuffles, kept in float by the quantizer): the loop on the
    // integer side's order, and a plain f32 reorder for the conversion, with the f32 tensor in
    // scratch memory of the kernel's own.
    if (effective_cpu_isa().avx512 && layout_capable && integer_side.channel_block == 0 &&
        !input_layout(0).bf16 && !output_layout(0).bf16) {
      const dnnl::memory::desc from = tensor_desc(dims, quantize_ ? input_layout(0) : integer_side);
      const dnnl::memory::desc to = tensor_desc(dims, quantize_ ? integer_side : output_layout(0));
      const dnnl::reorder::primitive_desc pd(cpu_engine(), from, cpu_engine(), to,
                                             primitive_attributes());
      if (!is_reference(pd)) {
        primitive_ = Primitive::of<dnnl::reorder>(pd);
        src_ = unbound_memory(from);
        dst_ = unbound_memory(to);
        scratch_.resize(static_cast<size_t>((quantize_ ? to : from).get_size() / sizeof(float)));
        path_ = Path::loop_and_reorder;
        set_impl(std::string("loop+") + pd.impl_info_str());
        return true;
      }
    }
    path_ = Path::reorder;
    if ((!input_layout(0).is_plain() || !output_layout(0).is_plain()) && !layout_capable)
      return false;
    const dnnl::memory::desc src_md = layout_capable ? tensor_desc(dims, input_layout(0), src_type_)
                                                     : plain_desc(dims, src_type_);
    const dnnl::memory::desc dst_md = layout_capable
                                          ? tensor_desc(dims, output_layout(0), dst_type_)
                                          : plain_desc(dims, dst_type_);
    dnnl::primitive_attr attr = primitive_attributes();
    attr.set_output_scales(0, {scale_});
    attr.set_zero_points(quantize_ ? DNNL_ARG_DST : DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    dnnl::reorder::primitive_desc pd(cpu_engine(), src_md, cpu_engine(), dst_md, attr);
    primitive_ = Primitive::of<dnnl::reorder>(pd);
    src_ = unbound_memory(src_md);
    dst_ = unbound_memory(dst_md);
    set_impl(pd);
    return true;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    if (path_ == Path::rgb_loop) {
      const int64_t batch = inputs[0].shape()[0];
      const int64_t pixels = batch > 0 ? inputs[0].size() / (3 * batch) : 0;
      quantize_rgb_to_channels_last(u8_, inputs[0].data<float>(), outputs[0].raw_data(), batch,
                                    pixels, loop_params_);
      return;
    }
    if (path_ == Path::blocked_loop) {
      const Shape& shape = inputs[0].shape();
      const Tensor& integer = quantize_ ? outputs[0] : inputs[0];
      const Tensor& real = quantize_ ? inputs[0] : outputs[0];
      const int64_t pixels = shape[2] * shape[3];
      // Units of one image's block, over the stream's threads.
      for_each_chunk_of_units(shape[0] * (shape[1] / avx512::lanes), pixels * avx512::lanes,
                              [&](int64_t first, int64_t count) {
                                blocked_linear(quantize_, u8_,
                                               const_cast<void*>(integer.raw_data()),
                                               const_cast<float*>(real.data<float>()), first, count,
                                               shape[1], pixels, loop_params_);
                              });
      return;
    }
    if (path_ == Path::loop_and_reorder) {
      // Dequantize into the scratch in the integer side's order, then reorder it out; or reorder
      // the float input into it, then quantize.
      const int64_t n = outputs[0].size();
      if (quantize_) {
        bind(src_, inputs[0]);
        dst_.set_data_handle(scratch_.data());
        primitive_.execute(stream_, {{DNNL_ARG_FROM, src_}, {DNNL_ARG_TO, dst_}});
        run_loop(scratch_.data(), outputs[0].raw_data(), n);
      } else {
        run_loop(inputs[0].raw_data(), scratch_.data(), n);
        src_.set_data_handle(scratch_.data());
        bind(dst_, outputs[0]);
        primitive_.execute(stream_, {{DNNL_ARG_FROM, src_}, {DNNL_ARG_TO, dst_}});
      }
      return;
    }
    if (path_ == Path::same_layout_loop) {
      run_loop(inputs[0].raw_data(), outputs[0].raw_data(), outputs[0].size());
      return;
    }
    bind(src_, inputs[0]);
    bind(dst_, outputs[0]);
    primitive_.execute(stream_,
                       {{DNNL_ARG_FROM, src_},
                        {DNNL_ARG_TO, dst_},
                        {DNNL_ARG_ATTR_ZERO_POINTS | (quantize_ ? DNNL_ARG_DST : DNNL_ARG_SRC),
                         zero_point_.memory()}});
  }

 private:
  bool quantize_ = true;
  bool u8_ = true;  // the integer side's type (else i8)
  float scale_ = 1.f;
  LinearParams loop_params_;
  // What run() does, chosen by prepare() (AVX-512 loops; elsewhere oneDNN's reorder): the loop
  // where both sides keep one layout; a plain RGB image into channels-last; channels-last
  // integers to or from 16-channel float blocks; the loop and a plain f32 reorder for any other
  // layout change.
  // The loop on `n` elements in one order, in chunks over the stream's threads (4 bytes per
  // element on the float side, 1 on the integer one).
  void run_loop(const void* in, void* out, int64_t n) const {
    const auto* from = static_cast<const unsigned char*>(in);
    auto* to = static_cast<unsigned char*>(out);
    const int64_t in_size = quantize_ ? 4 : 1, out_size = quantize_ ? 1 : 4;
    for_each_chunk(n, elementwise_chunk, [&](int64_t begin, int64_t count) {
      linear_avx512(quantize_, u8_, from + begin * in_size, to + begin * out_size, count,
                    loop_params_);
    });
  }

  enum class Path { reorder, same_layout_loop, rgb_loop, blocked_loop, loop_and_reorder };
  Path path_ = Path::reorder;
  std::vector<float> scratch_;  // loop_and_reorder's f32 tensor in the integer side's order
  size_t rank_ = 0;
  ZeroPointMemory zero_point_;
  dnnl::memory::data_type src_type_ = dnnl::memory::data_type::f32;
  dnnl::memory::data_type dst_type_ = dnnl::memory::data_type::u8;
  Primitive primitive_;
  dnnl::memory src_;
  dnnl::memory dst_;
};

}  // namespace

void register_linear_quantization(KernelRegistry& registry) {
  for (const char* op : {"QuantizeLinear", "DequantizeLinear"})
    registry.add(backend_name, backend_priority, op, create_kernel<LinearQuantizationKernel>);
}

}  // namespace troupe::kernels::onednn
