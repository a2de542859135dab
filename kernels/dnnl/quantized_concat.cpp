// QLinearConcat: each u8/i8 input requantized into the output's parameters with the f32 steps of
// DequantizeLinear and QuantizeLinear (engine/ops/quantization.cpp), bit for bit the reference's,
// or copied row by row where its parameters are the output's. Runs on plain tensors along any
// axis and on channels-last ones along the channels, as the int8 convolutions keep them
// (GoogLeNet's and Inception's branch joins); an input stored otherwise than the output is
// converted first. A loop vectorized for each ISA (below): oneDNN 2.6's concat cannot requantize.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu_isa.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/int8_vectors_avx512.hpp"
#include "kernels/dnnl/quantization_params.hpp"
#include "kernels/layout_conversion.hpp"

namespace troupe::kernels::onednn {

namespace {

struct Requantization {
  float scale = 1.f;
  int32_t zero = 0;
  float y_scale = 1.f, y_zero = 0.f;
};

// Each of `outer` rows of `row` inputs into its place in an output row of `y_row`: DQ's and Q's
// f32 steps, one branch-free loop per row.
template <class X, class Y>
[[gnu::always_inline]] inline void requantize_into(const X* x, Y* y, int64_t outer, int64_t row,
                                                   int64_t y_row, int64_t offset,
                                                   const Requantization& r) {
  const float scale = r.scale, y_scale = r.y_scale, y_zero = r.y_zero;
  const int32_t zero = r.zero;
  for (int64_t o = 0; o < outer; ++o) {
    const X* in = x + o * row;
    Y* out = y + o * y_row + offset;
    for (int64_t k = 0; k < row; ++k) {
      const float real = static_cast<float>(static_cast<int32_t>(in[k]) - zero) * scale;
      out[k] = quantize_scaled<Y>(real / y_scale, y_zero);
    }
  }
}

template <class X>
[[gnu::always_inline]] inline void requantize_from(const X* x, bool y_u8, void* y, int64_t outer,
                                                   int64_t row, int64_t y_row, int64_t offset,
                                                   const Requantization& r) {
  if (y_u8)
    requantize_into(x, static_cast<uint8_t*>(y), outer, row, y_row, offset, r);
  else
    requantize_into(x, static_cast<int8_t*>(y), outer, row, y_row, offset, r);
}

[[gnu::always_inline]] inline void requantize_any(bool x_u8, const void* x, bool y_u8, void* y,
                                                  int64_t outer, int64_t row, int64_t y_row,
                                                  int64_t offset, const Requantization& r) {
  if (x_u8)
    requantize_from(static_cast<const uint8_t*>(x), y_u8, y, outer, row, y_row, offset, r);
  else
    requantize_from(static_cast<const int8_t*>(x), y_u8, y, outer, row, y_row, offset, r);
}

// The loop compiled for each ISA and picked by the effective one, as QLinearAdd's: the library is
// built for the x86-64 baseline, and the SSE2 loop was a fifth of a quantized GoogLeNet's time
// on an AVX-512 CPU (half of that with AVX-512). AVX-512 runs 16 lanes at a time with
// intrinsics, each row's tail through the scalar loop.
using RequantizeRows = void (*)(bool, const void*, bool, void*, int64_t, int64_t, int64_t, int64_t,
                                const Requantization&);
template <class X, class Y>
[[TROUPE_AVX512_TARGET]] void requantize_vectors_avx512(const X* x, Y* y, int64_t outer,
                                                        int64_t row, int64_t y_row, int64_t offset,
                                                        const Requantization& r) {
  const __m512 scale = _mm512_set1_ps(r.scale), y_scale = _mm512_set1_ps(r.y_scale);
  const __m512i zero = _mm512_set1_epi32(r.zero);
  const auto requantize = avx512::Requantize::to<Y>(r.y_zero);
  for (int64_t o = 0; o < outer; ++o) {
    const X* in = x + o * row;
    Y* out = y + o * y_row + offset;
    int64_t k = 0;
    for (; k + avx512::lanes <= row; k += avx512::lanes)
      requantize.store(out + k, _mm512_div_ps(avx512::dequantize(in + k, zero, scale), y_scale));
    requantize_into(in + k, out + k, 1, row - k, 0, 0, r);
  }
}

template <class X>
[[TROUPE_AVX512_TARGET]] void requantize_from_avx512(const X* x, bool y_u8, void* y, int64_t outer,
                                                     int64_t row, int64_t y_row, int64_t offset,
                                                     const Requantization& r) {
  if (y_u8)
    requantize_vectors_avx512(x, static_cast<uint8_t*>(y), outer, row, y_row, offset, r);
  else
    requantize_vectors_avx512(x, static_cast<int8_t*>(y), outer, row, y_row, offset, r);
}

[[TROUPE_AVX512_TARGET]] void requantize_avx512(bool x_u8, const void* x, bool y_u8, void* y,
                                                int64_t outer, int64_t row, int64_t y_row,
                                                int64_t offset, const Requantization& r) {
  if (x_u8)
    requantize_from_avx512(static_cast<const uint8_t*>(x), y_u8, y, outer, row, y_row, offset, r);
  else
    requantize_from_avx512(static_cast<const int8_t*>(x), y_u8, y, outer, row, y_row, offset, r);
}
[[gnu::target("avx2")]] void requantize_avx2(bool x_u8, const void* x, bool y_u8, void* y,
                                             int64_t outer, int64_t row, int64_t y_row,
                                             int64_t offset, const Requantization& r) {
  requantize_any(x_u8, x, y_u8, y, outer, row, y_row, offset, r);
}
void requantize_baseline(bool x_u8, const void* x, bool y_u8, void* y, int64_t outer, int64_t row,
                         int64_t y_row, int64_t offset, const Requantization& r) {
  requantize_any(x_u8, x, y_u8, y, outer, row, y_row, offset, r);
}
RequantizeRows requantize_rows_for(const CpuIsa& isa) {
  return isa.avx512 ? requantize_avx512 : isa.avx2 ? requantize_avx2 : requantize_baseline;
}

class QuantizedConcatKernel final : public Kernel {
 public:
  explicit QuantizedConcatKernel(const KernelRequest& request) {
    const auto& in = request.inputs;
    const auto& c = request.constant_inputs;
    if (in.size() < 5 || (in.size() - 2) % 3 != 0 || request.outputs.size() != 1 ||
        c.size() != in.size())
      throw Unsupported{};
    const Shape& out = request.outputs[0].shape;
    y_type_ = request.outputs[0].type;
    // Sizes may be known only at run time (a dynamic batch): execute() reads the tensors' own.
    if (!is_8bit(y_type_)) throw Unsupported{};
    rank_ = out.rank();
    int64_t axis = request.node.attributes.get_int_or("axis", 1);
    if (axis < 0) axis += static_cast<int64_t>(rank_);
    axis_ = static_cast<size_t>(axis);
    y_scale_ = static_cast<float>(constant_scalar(c[0]));
    y_zero_ = static_cast<float>(constant_scalar(c[1]));
    for (size_t i = 2; i < in.size(); i += 3) {
      if (!is_8bit(in[i].type) || in[i].shape.rank() != rank_) throw Unsupported{};
      Part p;
      p.type = in[i].type;
      p.scale = static_cast<float>(constant_scalar(c[i + 1]));
      p.zero = static_cast<int32_t>(constant_scalar(c[i + 2]));
      p.copy = p.type == y_type_ && p.scale == y_scale_ && static_cast<float>(p.zero) == y_zero_;
      p.layout = request.input_layout(i);
      parts_.push_back(p);
    }
    y_layout_ = request.output_layout(0);
    channels_last_ = y_layout_.channels_last;
    if (channels_last_ && (rank_ != 4 || axis_ != 1)) throw Unsupported{};
  }

  std::string implementation() const override { return "dnnl:loop"; }

  TensorLayout preferred_input_layout(size_t i) const override {
    return i >= 2 && (i - 2) % 3 == 0 && channels_last_capable()
               ? TensorLayout::channels_last_order()
               : TensorLayout{};
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    return o == 0 && channels_last_capable() ? TensorLayout::channels_last_order() : TensorLayout{};
  }

  void execute(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    Tensor& y = outputs[0];
    const Shape& shape = y.shape();
    // Rows in storage order: channels-last concatenates channel runs of N*H*W pixels.
    int64_t outer = 1;
    if (channels_last_)
      outer = shape[0] * shape[2] * shape[3];
    else
      for (size_t d = 0; d < axis_; ++d) outer *= shape[d];
    const int64_t y_row = y.size() / std::max<int64_t>(outer, 1);
    scratch_.resize(parts_.size());
    int64_t offset = 0;
    for (size_t k = 0; k < parts_.size(); ++k) {
      const Part& p = parts_[k];
      const Shape& x_shape = inputs[2 + 3 * k].shape();
      for (size_t d = 0; d < rank_; ++d)
        if (x_shape.rank() != rank_ || (d != axis_ && x_shape[d] != shape[d]))
          throw ExecutionError("QLinearConcat: input " + std::to_string(k) + " of shape " +
                               x_shape.to_string() + " differs from the output " +
                               shape.to_string() + " outside axis " + std::to_string(axis_));
      const Tensor& x = in_layout(inputs[2 + 3 * k], p.layout, y_layout_, scratch_[k]);
      const int64_t row = x.size() / std::max<int64_t>(outer, 1);
      if (offset + row > y_row) throw ExecutionError("QLinearConcat: inputs overrun the output");
      auto* dst = static_cast<uint8_t*>(y.raw_data());
      const auto* src = static_cast<const uint8_t*>(x.raw_data());
      if (p.copy) {
        for (int64_t o = 0; o < outer; ++o)
          std::memcpy(dst + o * y_row + offset, src + o * row, static_cast<size_t>(row));
      } else {
        const Requantization r{p.scale, p.zero, y_scale_, y_zero_};
        requantize_rows_(p.type == ElementType::u8, src, y_type_ == ElementType::u8, y.raw_data(),
                         outer, row, y_row, offset, r);
      }
      offset += row;
    }
    if (offset != y_row) throw ExecutionError("QLinearConcat: inputs do not fill the output");
  }

 private:
  struct Part {
    ElementType type = ElementType::u8;
    float scale = 1.f;
    int32_t zero = 0;
    bool copy = false;  // the output's parameters: Q(DQ(x)) = x
    TensorLayout layout;
  };

  bool channels_last_capable() const { return rank_ == 4 && axis_ == 1; }

  ElementType y_type_ = ElementType::u8;
  float y_scale_ = 1.f, y_zero_ = 0.f;
  size_t rank_ = 0;
  size_t axis_ = 1;
  bool channels_last_ = false;
  TensorLayout y_layout_;
  std::vector<Part> parts_;
  std::vector<Tensor> scratch_;
  RequantizeRows requantize_rows_ = requantize_rows_for(effective_cpu_isa());
};

}  // namespace

void register_quantized_concat(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "QLinearConcat",
               construct_kernel<QuantizedConcatKernel>);
}

}  // namespace troupe::kernels::onednn
