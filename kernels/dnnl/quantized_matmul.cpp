// QLinearMatMul with a constant 2-D s8 B (zero point 0, per-tensor or per-column scales) on
// oneDNN's int8 matmul: A's leading dimensions are rows of one [M, K] x [K, N] product; the fused
// i32 bias, the requantization and the fused activation (engine/ops/quantized_post_ops.hpp) are
// the primitive's bias, output scales, zero points and post-ops. With a float output the
// primitive writes f32 scaled by a_scale * b_scale alone.
#include "engine/ops/quantized_post_ops.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/post_ops.hpp"
#include "kernels/dnnl/quantization_params.hpp"
#include "kernels/int8_exactness.hpp"

namespace troupe::kernels::onednn {

namespace {

class QuantizedMatMulKernel final : public DnnlKernel {
 public:
  explicit QuantizedMatMulKernel(const KernelRequest& request) : DnnlKernel(request) {
    const auto& in = request.inputs;
    float_output_ = quantized::has_float_output(request.node);
    const ElementType out =
        request.outputs.empty() ? ElementType::undefined : request.outputs[0].type;
    if (in.size() < 8 || present_outputs(request) != 1 || !is_8bit(in[0].type) ||
        in[3].type != ElementType::i8 ||
        !(float_output_ ? out == ElementType::f32 : is_8bit(out)) || constant(3) == nullptr ||
        in[3].shape.rank() != 2 || in[0].shape.rank() < 2 || fused::has_sum(request.node))
      throw Unsupported{};
    if (!int8_product_is_exact(in[0].type, *constant(3), false)) throw Unsupported{};
    params_ = read_quantized_params(request.node, request.constant_inputs);
    if (!supports_fused_activation(request.node)) throw Unsupported{};
    with_bias_ = fused::has_bias(request.node);
    src_type_ = *to_dnnl(in[0].type);
    dst_type_ = *to_dnnl(request.outputs[0].type);
    src_zero_point_ = ZeroPointMemory(params_.x_zero_point);
    dst_zero_point_ = ZeroPointMemory(params_.y_zero_point);
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const Dims a = to_dims(inputs[0]);
    const Dims b = to_dims(inputs[3]);
    const int64_t k = a.back();
    const int64_t n = b[1];
    if (b[0] != k || to_dims(outputs[0]).back() != n) return false;
    if (params_.w_scales.size() != 1 && static_cast<int64_t>(params_.w_scales.size()) != n)
      return false;
    const int64_t m = inputs[0].element_count() / std::max<int64_t>(k, 1);
    if (outputs[0].element_count() != m * n) return false;
    const auto s8 = dnnl::memory::data_type::s8;
    const auto s32 = dnnl::memory::data_type::s32;
    const dnnl::memory::desc src_md = plain_desc({m, k}, src_type_);
    const dnnl::memory::desc weights_md = plain_desc({k, n}, s8);
    const dnnl::memory::desc bias_md = plain_desc({1, n}, s32);
    const dnnl::memory::desc dst_md = plain_desc({m, n}, dst_type_);
    const dnnl::memory::desc weights_any({k, n}, s8, dnnl::memory::format_tag::any);
    dnnl::matmul::desc desc = with_bias_ ? dnnl::matmul::desc(src_md, weights_any, bias_md, dst_md)
                                         : dnnl::matmul::desc(src_md, weights_any, dst_md);
    dnnl::post_ops ops;
    append_fused_activation(node_, ops, params_.activation_scale());
    dnnl::primitive_attr attr = primitive_attributes(ops);
    const std::vector<float> scales = params_.output_scales();
    attr.set_output_scales(scales.size() == 1 ? 0 : 1 << 1, scales);
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (!float_output_) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
    primitive_ = Primitive::of<dnnl::matmul>(pd);
    src_ = unbound_memory(src_md);
    dst_ = unbound_memory(dst_md);
    bias_ = unbound_memory(bias_md);
    weights_ = PackedWeights(weights_md, pd.weights_desc(), constant(3), stream_);
    set_impl(pd);
    return true;
  }

  const PackedWeights* packed_weights(size_t i) const override {
    return i == 3 ? &weights_ : nullptr;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    bind(src_, inputs[0]);
    bind(dst_, outputs[0]);
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, src_},
        {DNNL_ARG_WEIGHTS, weights_.get(inputs[3], stream_)},
        {DNNL_ARG_DST, dst_},
        {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, src_zero_point_.memory()}};
    if (!float_output_) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST] = dst_zero_point_.memory();
    if (with_bias_) {
      bind(bias_, inputs[8]);
      args[DNNL_ARG_BIAS] = bias_;
    }
    primitive_.execute(stream_, args);
  }

 private:
  QuantizedProductParams params_;
  bool with_bias_ = false;
  bool float_output_ = false;
  dnnl::memory::data_type src_type_ = dnnl::memory::data_type::u8;
  dnnl::memory::data_type dst_type_ = dnnl::memory::data_type::u8;
  ZeroPointMemory src_zero_point_;
  ZeroPointMemory dst_zero_point_;
  Primitive primitive_;
  dnnl::memory src_;
  dnnl::memory dst_;
  dnnl::memory bias_;
  PackedWeights weights_;
};

}  // namespace

void register_quantized_matmul(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "QLinearMatMul",
               create_kernel<QuantizedMatMulKernel>);
}

}  // namespace troupe::kernels::onednn
