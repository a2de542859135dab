// Unary element-wise ops on oneDNN's eltwise primitive. The data is dense, so every tensor is seen
// as one flat vector whatever its shape. Small tensors of the simplest ops run as a loop of
// troupe's own instead (below).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/eltwise_loop.hpp"

namespace troupe::kernels::onednn {

namespace {

struct EltwiseAlgorithm {
  dnnl::algorithm algorithm;
  float alpha = 0.f;
  float beta = 0.f;
  bool clip_to_unit = false;  // then clamp to [0, 1] (a second primitive)
};

// A Clip bound given as an input (opset 11+) must be a constant scalar to be baked into the
// primitive.
float constant_bound(const KernelRequest& request, size_t index, float fallback) {
  if (index >= request.inputs.size() || request.inputs[index].type == ElementType::undefined)
    return fallback;
  if (index >= request.constant_inputs.size() || !request.constant_inputs[index])
    throw Unsupported{};
  const Tensor& t = *request.constant_inputs[index];
  if (t.size() != 1) throw Unsupported{};
  return static_cast<float>(t.value_at(0));
}

// Pow's exponent: a constant scalar of any numeric type, else the reference kernel runs it.
float constant_exponent(const KernelRequest& request) {
  if (request.inputs.size() != 2 || request.constant_inputs.size() < 2 ||
      !request.constant_inputs[1] || request.constant_inputs[1]->size() != 1)
    throw Unsupported{};
  return static_cast<float>(request.constant_inputs[1]->value_at(0));
}

EltwiseAlgorithm choose_algorithm(const KernelRequest& request) {
  using alg = dnnl::algorithm;
  const std::string& op = request.node.op_type;
  const Attributes& a = request.node.attributes;
  if (op == "Relu") return {alg::eltwise_relu};
  if (op == "LeakyRelu")
    return {alg::eltwise_relu, static_cast<float>(a.get_float_or("alpha", 0.01))};
  if (op == "Sigmoid") return {alg::eltwise_logistic};
  if (op == "Tanh") return {alg::eltwise_tanh};
  if (op == "Exp") return {alg::eltwise_exp};
  if (op == "Log") return {alg::eltwise_log};
  if (op == "Sqrt") return {alg::eltwise_sqrt};
  if (op == "Abs") return {alg::eltwise_abs};
  if (op == "Neg") return {alg::eltwise_linear, -1.f, 0.f};
  if (op == "Elu") return {alg::eltwise_elu, static_cast<float>(a.get_float_or("alpha", 1.0))};
  if (op == "Softplus") return {alg::eltwise_soft_relu};
  if (op == "HardSwish") return {alg::eltwise_hardswish};
  if (op == "Swish") return {alg::eltwise_swish, static_cast<float>(a.get_float_or("alpha", 1.0))};
  if (op == "Mish") return {alg::eltwise_mish};
  // oneDNN 2.6 has no hardsigmoid: alpha * x + beta, then a clip to [0, 1].
  if (op == "HardSigmoid")
    return {alg::eltwise_linear, static_cast<float>(a.get_float_or("alpha", 0.2)),
            static_cast<float>(a.get_float_or("beta", 0.5)), true};
  if (op == "Round") return {alg::eltwise_round};  // half to even, as ONNX
  if (op == "Reciprocal") return {alg::eltwise_pow, 1.f, -1.f};
  // x^2 (RMSNorm, variances), x^3 (tanh-GELU written out), x^0.5: exact for 2, 0.5, 1 and -1
  // (a square, a square root, a division), std::pow's powf otherwise.
  if (op == "Pow") return {alg::eltwise_pow, 1.f, constant_exponent(request)};
  if (op == "Gelu") {
    std::string approximate = a.get_string_or("approximate", "none");
    if (approximate == "none") return {alg::eltwise_gelu_erf};
    if (approximate == "tanh") return {alg::eltwise_gelu_tanh};
    throw Unsupported{};
  }
  if (op == "Clip") {
    constexpr float inf = std::numeric_limits<float>::infinity();
    float lo = static_cast<float>(a.get_float_or("min", -inf));
    float hi = static_cast<float>(a.get_float_or("max", inf));
    lo = constant_bound(request, 1, lo);
    hi = constant_bound(request, 2, hi);
    return {alg::eltwise_clip_v2, lo, hi};
  }
  throw Unsupported{};
}

// Up to this many elements an op run_small computes skips the primitive, whose execution costs
// ~2.5 us whatever the size (its argument maps and execution context): a chain of 200 Relu/Exp
// of 16 elements took 0.19 ms of op time (as the binary ops' rows, kernels/dnnl/binary.cpp).
// Below it a node stays on one thread anyway (engine/graph/thread_policy.cpp).
constexpr int64_t loop_up_to_elements = 16384;

class EltwiseKernel final : public SrcDstKernel {
 public:
  explicit EltwiseKernel(const KernelRequest& request)
      : SrcDstKernel(request), algorithm_(choose_algorithm(request)) {
    if (present_outputs(request) != 1) throw Unsupported{};
    // Element by element, any layout will do: an activation that is not fused (after a
    // BatchNormalization, a residual Add, a join) keeps the model's layout.
    lay_out_first_operand(request);
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    int64_t n = outputs[0].element_count();
    if (inputs[0].element_count() != n) return false;
    // Same layout in and out (no padding: the graph compiler lays out only channels the block
    // divides): one flat vector. Else the primitive runs in the input's layout and a reorder
    // writes the output's.
    const bool same_layout = input_layout(0) == output_layout(0);
    loop_ = same_layout && !input_layout(0).bf16 &&
            (n <= loop_up_to_elements || loop_outruns_jit(algorithm_.algorithm)) &&
            loop_computes(algorithm_.algorithm, algorithm_.beta);
    if (loop_) {
      set_impl("loop");
      return true;
    }
    if (!same_layout && (inputs[0].rank() < 4 || inputs[0].rank() > 5 || input_layout(0).bf16 ||
                         output_layout(0).bf16))
      return false;
    dnnl::memory::desc md =
        same_layout ? plain_f32({n}) : tensor_desc(to_dims(inputs[0]), input_layout(0));
    const dnnl::memory::desc dst_md =
        same_layout ? md : tensor_desc(to_dims(outputs[0]), output_layout(0));
    dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm_.algorithm, md,
                                     algorithm_.alpha, algorithm_.beta);
    dnnl::eltwise_forward::primitive_desc pd(desc, primitive_attributes(), cpu_engine());
    if (algorithm_.clip_to_unit) {
      // A second pass in place: oneDNN 2.6's jit eltwise takes no post-ops (its reference
      // kernel, which does, wrote NaNs here). The output, whatever its layout, as one vector.
      const dnnl::memory::desc flat = plain_f32({n});
      dnnl::eltwise_forward::desc clip(dnnl::prop_kind::forward_inference,
                                       dnnl::algorithm::eltwise_clip_v2, flat, 0.f, 1.f);
      clip_ = Primitive::of<dnnl::eltwise_forward>(
          dnnl::eltwise_forward::primitive_desc(clip, primitive_attributes(), cpu_engine()));
      clip_memory_ = unbound_memory(flat);
    }
    return adopt<dnnl::eltwise_forward>(pd, md, dst_md);
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    if (loop_) {
      run_eltwise_loop(algorithm_.algorithm, algorithm_.alpha, algorithm_.beta,
                       algorithm_.clip_to_unit, inputs[0].data<float>(), outputs[0].data<float>(),
                       outputs[0].size());
      return;
    }
    SrcDstKernel::run(inputs, outputs);
    if (!algorithm_.clip_to_unit) return;
    bind(clip_memory_, outputs[0]);
    clip_.execute(stream_, {{DNNL_ARG_SRC, clip_memory_}, {DNNL_ARG_DST, clip_memory_}});
  }

 private:
  EltwiseAlgorithm algorithm_;
  bool loop_ = false;  // computed by run_eltwise_loop, not a primitive
  Primitive clip_;     // HardSigmoid's clamp to [0, 1]
  dnnl::memory clip_memory_;
};

}  // namespace

void register_eltwise(KernelRegistry& registry) {
  // Not Log: oneDNN's log is accurate to about 1e-6 absolute, which misses ONNX's atol of 1e-7
  // near log(1) = 0; the reference kernel keeps it exact.
  for (const char* op :
       {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Exp", "Sqrt", "Abs", "Neg", "Elu", "Softplus",
        "HardSwish", "HardSigmoid", "Gelu", "Clip", "Round", "Reciprocal", "Swish", "Mish"})
    registry.add(backend_name, backend_priority, op, make_kernel<EltwiseKernel>);
  registry.add(backend_name, backend_priority, "Pow", make_kernel_for_data<EltwiseKernel>);
}

}  // namespace troupe::kernels::onednn
