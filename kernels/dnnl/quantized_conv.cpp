// QLinearConv (u8/s8 activations, constant s8 weights with zero point 0, per-tensor or
// per-output-channel weight scales, i32 bias) on oneDNN's int8 convolution: the requantization,
// the zero points, the fused residual and activation (engine/ops/quantized_post_ops.hpp) are
// applied by the primitive as output scales, zero points and post-ops. oneDNN 2.6's jit int8
// convolutions read channels-last activations (plain NCHW gets its reference kernel), so the
// kernel asks the graph compiler for channels-last and reorders whatever else it is given.
#include "engine/ops/quantized_post_ops.hpp"
#include "engine/ops/spatial.hpp"
#include "kernels/dnnl/conv_geometry.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/post_ops.hpp"
#include "kernels/dnnl/quantization_params.hpp"
#include "kernels/int8_exactness.hpp"

namespace troupe::kernels::onednn {

namespace {

class QuantizedConvKernel final : public DnnlKernel {
 public:
  explicit QuantizedConvKernel(const KernelRequest& request) : DnnlKernel(request) {
    const auto& in = request.inputs;
    if (in.size() < 8 || present_outputs(request) != 1 || !is_8bit(in[0].type) ||
        in[3].type != ElementType::i8 || !is_8bit(request.outputs[0].type) || !has_input(3) ||
        constant(3) == nullptr)
      throw Unsupported{};
    params_ = read_quantized_params(request.node, request.constant_inputs);
    if (!supports_fused_activation(request.node)) throw Unsupported{};
    group_ = request.node.attributes.get_int_or("group", 1);
    const size_t rank = in[0].shape.rank();
    if (group_ < 1 || rank < 3 || rank > 5 || in[3].shape.rank() != rank) throw Unsupported{};
    rank_ = rank;
    const bool depthwise = in[3].shape[1] == 1 && group_ == in[3].shape[0];
    if (!int8_product_is_exact(in[0].type, *constant(3), depthwise)) throw Unsupported{};
    residual_index_ = quantized::plain_inputs(request.node);
    if (params_.sum &&
        (in.size() != residual_index_ + 3 || in[residual_index_].type != request.outputs[0].type))
      throw Unsupported{};
    std::vector<int64_t> kernel(in[3].shape.begin() + 2, in[3].shape.end());
    window_ = spatial::read_window(request.node, rank - 2, kernel);
    src_type_ = *to_dnnl(in[0].type);
    dst_type_ = *to_dnnl(request.outputs[0].type);
    src_zero_point_ = ZeroPointMemory(params_.x_zero_point);
    dst_zero_point_ = ZeroPointMemory(params_.y_zero_point);
  }

  TensorLayout preferred_input_layout(size_t i) const override {
    return i == 0 || (params_.sum && i == residual_index_) ? TensorLayout::channels_last_order()
                                                           : TensorLayout{};
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    return o == 0 ? TensorLayout::channels_last_order() : TensorLayout{};
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const Dims src = to_dims(inputs[0]);
    const Dims weights = to_dims(inputs[3]);
    const Dims dst = to_dims(outputs[0]);
    if (src.size() != rank_ || weights.size() != rank_ || dst.size() != rank_) return false;
    const int64_t out_channels = weights[0];
    if (src[1] != weights[1] * group_ || out_channels % group_ != 0 || dst[1] != out_channels)
      return false;
    if (params_.w_scales.size() != 1 &&
        static_cast<int64_t>(params_.w_scales.size()) != out_channels)
      return false;
    spatial::Window window = window_;
    window.kernel.assign(weights.begin() + 2, weights.end());
    const spatial::Geometry g =
        spatial::forward_geometry(node_, window, spatial::spatial_dims(inputs[0]));
    const std::optional<ConvDims> dims = conv_dims(window, g, dst);
    if (!dims) return false;
    // Named copies: lambdas below capture them (C++17 lambdas cannot capture bindings).
    const Dims strides = dims->strides, dilation = dims->dilation;
    const Dims pad_l = dims->pad_l, pad_r = dims->pad_r;
    const Dims plain_weights = grouped_weights(weights, group_);
    with_bias_ = has_input(8);
    if (with_bias_ && inputs[8].element_count() != out_channels) return false;

    const dnnl::memory::desc src_md = tensor_desc(src, input_layout(0), src_type_);
    const dnnl::memory::desc dst_md = tensor_desc(dst, output_layout(0), dst_type_);
    const dnnl::memory::desc bias_md = plain_desc({out_channels}, dnnl::memory::data_type::s32);
    auto create = [&](bool assigned_layouts) {
      auto any = [](const Dims& dims, dnnl::memory::data_type t) {
        return dnnl::memory::desc(dims, t, dnnl::memory::format_tag::any);
      };
      // A plain tensor lets the primitive choose (channels-last; plain gets oneDNN's reference).
      const dnnl::memory::desc src_choice =
          !assigned_layouts || input_layout(0).is_plain() ? any(src, src_type_) : src_md;
      const dnnl::memory::desc dst_choice =
          !assigned_layouts || output_layout(0).is_plain() ? any(dst, dst_type_) : dst_md;
      const auto weights_choice = any(plain_weights, dnnl::memory::data_type::s8);
      const auto kind = dnnl::prop_kind::forward_inference;
      const auto algorithm = dnnl::algorithm::convolution_direct;
      dnnl::convolution_forward::desc desc =
          with_bias_ ? dnnl::convolution_forward::desc(kind, algorithm, src_choice, weights_choice,
                                                       bias_md, dst_choice, strides, dilation,
                                                       pad_l, pad_r)
                     : dnnl::convolution_forward::desc(kind, algorithm, src_choice, weights_choice,
                                                       dst_choice, strides, dilation, pad_l, pad_r);
      dnnl::post_ops ops;
      if (params_.sum) ops.append_sum(params_.sum_scale(), params_.r_zero_point, dst_type_);
      append_fused_activation(node_, ops, params_.activation_scale());
      dnnl::primitive_attr attr = primitive_attributes(ops);
      const std::vector<float> scales = params_.output_scales();
      attr.set_output_scales(scales.size() == 1 ? 0 : 1 << 1, scales);
      // Zero points only where they are not 0 (a ReLU's output usually has 0): oneDNN 2.6's
      // brgemm convolutions take no source zero point and would leave the layer to the slower
      // jit_int8 kernel.
      if (params_.x_zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
      if (params_.y_zero_point != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
      return dnnl::convolution_forward::primitive_desc(desc, attr, cpu_engine());
    };
    const dnnl::convolution_forward::primitive_desc pd =
        unless_reference(create(true), [&] { return create(false); });
    primitive_ = Primitive::of<dnnl::convolution_forward>(pd);
    src_ = LayoutBridge(src_md, pd.src_desc(), 0);
    dst_ = LayoutBridge(dst_md, pd.dst_desc(), 1);
    if (params_.sum)
      residual_ = LayoutBridge(tensor_desc(dst, input_layout(residual_index_), dst_type_),
                               pd.dst_desc(), 2);
    const dnnl::memory::desc weights_md = plain_desc(plain_weights, dnnl::memory::data_type::s8);
    weights_ = PackedWeights(weights_md, pd.weights_desc(), constant(3), stream_);
    bias_ = unbound_memory(bias_md);
    set_impl(pd);
    return true;
  }

  const PackedWeights* packed_weights(size_t i) const override {
    return i == 3 ? &weights_ : nullptr;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, src_.to_internal(inputs[0], stream_)},
        {DNNL_ARG_WEIGHTS, weights_.get(inputs[3], stream_)}};
    if (params_.x_zero_point != 0)
      args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = src_zero_point_.memory();
    if (params_.y_zero_point != 0)
      args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST] = dst_zero_point_.memory();
    if (with_bias_) {
      bind(bias_, inputs[8]);
      args[DNNL_ARG_BIAS] = bias_;
    }
    if (params_.sum) {
      // The sum post-op accumulates into dst: start it from the residual, in dst's layout.
      const dnnl::memory& dst = dst_.output_memory(outputs[0]);
      residual_.to_memory(inputs[residual_index_], dst, stream_);
      args[DNNL_ARG_DST] = dst;
    } else {
      args[DNNL_ARG_DST] = dst_.output_memory(outputs[0]);
    }
    primitive_.execute(stream_, args);
    dst_.from_internal(outputs[0], stream_);
  }

 private:
  QuantizedProductParams params_;
  int64_t group_ = 1;
  size_t rank_ = 0;
  size_t residual_index_ = 9;
  spatial::Window window_;
  dnnl::memory::data_type src_type_ = dnnl::memory::data_type::u8;
  dnnl::memory::data_type dst_type_ = dnnl::memory::data_type::u8;
  bool with_bias_ = false;
  ZeroPointMemory src_zero_point_;
  ZeroPointMemory dst_zero_point_;
  Primitive primitive_;
  LayoutBridge src_;
  LayoutBridge dst_;
  LayoutBridge residual_;
  PackedWeights weights_;
  dnnl::memory bias_;
};

}  // namespace

void register_quantized_convolution(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "QLinearConv", create_kernel<QuantizedConvKernel>);
}

}  // namespace troupe::kernels::onednn
