// QLinearAdd of two same-shape u8/i8 tensors with a Relu or no activation, as one pass of f32
// arithmetic: exactly the steps of the DequantizeLinear/Add/Relu/QuantizeLinear chain it stands
// for (engine/ops/quantized_post_ops.hpp), so it matches the reference bit for bit. oneDNN 2.6's
// binary primitive takes scales but no zero points, so this one is a loop the compiler vectorizes
// for each ISA (below); the tensors may be channels-last like the int8 convolutions around them
// (the operation is element-wise: any layout, as long as all three agree).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>

#include "engine/ops/quantized_post_ops.hpp"
#include "kernels/cpu_isa.hpp"
#include "kernels/dnnl/chunked_loop.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/int8_vectors_avx512.hpp"
#include "kernels/dnnl/quantization_params.hpp"
#include "kernels/kernel_registry.hpp"
#include "kernels/layout_conversion.hpp"

namespace troupe::kernels::onednn {

namespace {

struct AddParams {
  float a_scale = 1.f, b_scale = 1.f, c_scale = 1.f, c_zero = 0.f;
  int32_t a_zero = 0, b_zero = 0;
  bool relu = false;
};

// The chain's f32 steps: DQ of each operand, their sum, Relu, then Q's division, rounding and
// saturation. This
// file is compiled with -ffp-contract=off: a fused multiply-add (AVX2, AVX-512) would round
// differently from the chain.
template <class A, class B, class C>
[[gnu::always_inline]] inline void add_loop(const A* a, const B* b, C* c, int64_t n,
                                            const AddParams& p) {
  const float a_scale = p.a_scale, b_scale = p.b_scale, c_scale = p.c_scale, c_zero = p.c_zero;
  const int32_t a_zero = p.a_zero, b_zero = p.b_zero;
  const bool relu = p.relu;
  for (int64_t i = 0; i < n; ++i) {
    const float x = static_cast<float>(static_cast<int32_t>(a[i]) - a_zero) * a_scale;
    const float y = static_cast<float>(static_cast<int32_t>(b[i]) - b_zero) * b_scale;
    float sum = x + y;
    if (relu) sum = sum < 0.f ? 0.f : sum;
    c[i] = quantize_scaled<C>(sum / c_scale, c_zero);
  }
}

template <class A, class B>
[[gnu::always_inline]] inline void add_to(const A* a, const B* b, bool c_u8, void* c, int64_t n,
                                          const AddParams& p) {
  if (c_u8)
    add_loop(a, b, static_cast<uint8_t*>(c), n, p);
  else
    add_loop(a, b, static_cast<int8_t*>(c), n, p);
}

template <class A>
[[gnu::always_inline]] inline void add_from(const A* a, bool b_u8, const void* b, bool c_u8,
                                            void* c, int64_t n, const AddParams& p) {
  if (b_u8)
    add_to(a, static_cast<const uint8_t*>(b), c_u8, c, n, p);
  else
    add_to(a, static_cast<const int8_t*>(b), c_u8, c, n, p);
}

[[gnu::always_inline]] inline void add_any(bool a_u8, const void* a, bool b_u8, const void* b,
                                           bool c_u8, void* c, int64_t n, const AddParams& p) {
  if (a_u8)
    add_from(static_cast<const uint8_t*>(a), b_u8, b, c_u8, c, n, p);
  else
    add_from(static_cast<const int8_t*>(a), b_u8, b, c_u8, c, n, p);
}

// The loop compiled for each ISA: the library is built for the x86-64 baseline, whose SSE2 loop
// took 1.4 ns per element (ResNet-50's 16 residual adds were a third of an int8 inference on an
// AVX-512 CPU). The kernel picks one by the effective ISA, so a run capped with
// ONEDNN_MAX_CPU_ISA tests the others; each computes the same f32 steps lane by lane. AVX-512
// runs them 16 lanes at a time with intrinsics (the vectorized C++ loop took 0.8 ns per
// element, these 0.21 ns), the tail through the scalar loop.
using AddLoop = void (*)(bool, const void*, bool, const void*, bool, void*, int64_t,
                         const AddParams&);

template <class A, class B, class C>
[[TROUPE_AVX512_TARGET]] void add_vectors_avx512(const A* a, const B* b, C* c, int64_t n,
                                                 const AddParams& p) {
  const __m512 a_scale = _mm512_set1_ps(p.a_scale), b_scale = _mm512_set1_ps(p.b_scale);
  const __m512 c_scale = _mm512_set1_ps(p.c_scale);
  const __m512i a_zero = _mm512_set1_epi32(p.a_zero), b_zero = _mm512_set1_epi32(p.b_zero);
  const auto requantize = avx512::Requantize::to<C>(p.c_zero);
  int64_t i = 0;
  for (; i + avx512::lanes <= n; i += avx512::lanes) {
    __m512 sum = _mm512_add_ps(avx512::dequantize(a + i, a_zero, a_scale),
                               avx512::dequantize(b + i, b_zero, b_scale));
    if (p.relu) sum = _mm512_max_ps(sum, _mm512_setzero_ps());
    requantize.store(c + i, _mm512_div_ps(sum, c_scale));
  }
  add_loop(a + i, b + i, c + i, n - i, p);
}

template <class A, class B>
[[TROUPE_AVX512_TARGET]] void add_to_avx512(const A* a, const B* b, bool c_u8, void* c, int64_t n,
                                            const AddParams& p) {
  if (c_u8)
    add_vectors_avx512(a, b, static_cast<uint8_t*>(c), n, p);
  else
    add_vectors_avx512(a, b, static_cast<int8_t*>(c), n, p);
}

[[TROUPE_AVX512_TARGET]] void add_avx512(bool a_u8, const void* a, bool b_u8, const void* b,
                                         bool c_u8, void* c, int64_t n, const AddParams& p) {
  const auto* a8 = static_cast<const uint8_t*>(a);
  const auto* as8 = static_cast<const int8_t*>(a);
  const auto* b8 = static_cast<const uint8_t*>(b);
  const auto* bs8 = static_cast<const int8_t*>(b);
  if (a_u8 && b_u8) return add_to_avx512(a8, b8, c_u8, c, n, p);
  if (a_u8) return add_to_avx512(a8, bs8, c_u8, c, n, p);
  if (b_u8) return add_to_avx512(as8, b8, c_u8, c, n, p);
  add_to_avx512(as8, bs8, c_u8, c, n, p);
}
[[gnu::target("avx2")]] void add_avx2(bool a_u8, const void* a, bool b_u8, const void* b, bool c_u8,
                                      void* c, int64_t n, const AddParams& p) {
  add_any(a_u8, a, b_u8, b, c_u8, c, n, p);
}
void add_baseline(bool a_u8, const void* a, bool b_u8, const void* b, bool c_u8, void* c, int64_t n,
                  const AddParams& p) {
  add_any(a_u8, a, b_u8, b, c_u8, c, n, p);
}
AddLoop add_loop_for(const CpuIsa& isa) {
  return isa.avx512 ? add_avx512 : isa.avx2 ? add_avx2 : add_baseline;
}

class QuantizedAddKernel final : public Kernel {
 public:
  explicit QuantizedAddKernel(const KernelRequest& request) {
    const auto& in = request.inputs;
    if (in.size() != 8 || request.outputs.size() != 1 || !is_8bit(in[0].type) ||
        !is_8bit(in[3].type) || !is_8bit(request.outputs[0].type))
      throw Unsupported{};
    // Same-shape operands. Sizes known only at run time (a dynamic batch) may turn out to
    // broadcast: those runs go to the reference kernel.
    if (in[0].shape != in[3].shape || in[0].shape != request.outputs[0].shape) throw Unsupported{};
    if (!in[0].shape.is_static()) {
      // The reference kernel reads plain tensors; such operands stay plain.
      if (!request.input_layout(0).is_plain() || !request.input_layout(3).is_plain() ||
          !request.output_layout(0).is_plain())
        throw Unsupported{};
      broadcast_fallback_ = KernelRegistry::instance().create_with("reference", request);
      if (!broadcast_fallback_) throw Unsupported{};
    }
    const std::string activation = fused::activation(request.node);
    if (!activation.empty() && activation != "Relu") throw Unsupported{};
    params_.relu = activation == "Relu";
    const auto& c = request.constant_inputs;
    if (c.size() != 8) throw Unsupported{};
    params_.a_scale = static_cast<float>(constant_scalar(c[1]));
    params_.a_zero = static_cast<int32_t>(constant_scalar(c[2]));
    params_.b_scale = static_cast<float>(constant_scalar(c[4]));
    params_.b_zero = static_cast<int32_t>(constant_scalar(c[5]));
    params_.c_scale = static_cast<float>(constant_scalar(c[6]));
    params_.c_zero = static_cast<float>(constant_scalar(c[7]));
    a_type_ = in[0].type;
    b_type_ = in[3].type;
    c_type_ = request.outputs[0].type;
    rank_ = in[0].shape.rank();
    a_layout_ = request.input_layout(0);
    b_layout_ = request.input_layout(3);
    c_layout_ = request.output_layout(0);
  }

  std::string implementation() const override { return "dnnl:loop"; }

  TensorLayout preferred_input_layout(size_t i) const override {
    return (i == 0 || i == 3) && laid_out() ? TensorLayout::channels_last_order() : TensorLayout{};
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    return o == 0 && laid_out() ? TensorLayout::channels_last_order() : TensorLayout{};
  }

  void execute(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    const Tensor& a = in_layout(inputs[0], a_layout_, c_layout_, a_scratch_);
    const Tensor& b = in_layout(inputs[3], b_layout_, c_layout_, b_scratch_);
    Tensor& c = outputs[0];
    if (broadcast_fallback_ && (inputs[0].shape() != c.shape() || inputs[3].shape() != c.shape()))
      return broadcast_fallback_->execute(inputs, outputs);
    const int64_t n = c.size();
    if (a.size() != n || b.size() != n)
      throw ExecutionError("QLinearAdd: operands of " + std::to_string(a.size()) + " and " +
                           std::to_string(b.size()) + " elements for an output of " +
                           std::to_string(n));
    // One byte per element on every side; chunks spread over the stream's threads (a ResNet-50
    // residual sum is 0.2-0.8 M elements).
    const auto* a_bytes = static_cast<const uint8_t*>(a.raw_data());
    const auto* b_bytes = static_cast<const uint8_t*>(b.raw_data());
    auto* c_bytes = static_cast<uint8_t*>(c.raw_data());
    for_each_chunk(n, elementwise_chunk, [&](int64_t begin, int64_t count) {
      loop_(a_type_ == ElementType::u8, a_bytes + begin, b_type_ == ElementType::u8,
            b_bytes + begin, c_type_ == ElementType::u8, c_bytes + begin, count, params_);
    });
  }

 private:
  AddParams params_;
  AddLoop loop_ = add_loop_for(effective_cpu_isa());
  ElementType a_type_ = ElementType::u8, b_type_ = ElementType::u8, c_type_ = ElementType::u8;
  size_t rank_ = 0;
  TensorLayout a_layout_, b_layout_, c_layout_;
  Tensor a_scratch_, b_scratch_;
  std::unique_ptr<Kernel> broadcast_fallback_;  // shapes known only at run time

  bool laid_out() const { return rank_ == 4 && !broadcast_fallback_; }
};

}  // namespace

void register_quantized_add(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "QLinearAdd", construct_kernel<QuantizedAddKernel>);
}

}  // namespace troupe::kernels::onednn
