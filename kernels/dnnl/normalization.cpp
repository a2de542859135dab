// BatchNormalization (inference, with the running statistics) and LayerNormalization on oneDNN's
// normalization primitives.
#include "engine/ops/fused_post_ops.hpp"
#include "kernels/dnnl/batch_norm_rows.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"

namespace troupe::kernels::onednn {

namespace {

// A 4-D tensor may be read and written in the model's activation layout (DenseNet normalizes
// each join before its convolution; on plain tensors oneDNN runs its unvectorized ncsp kernel and
// every join around it went plain). An output in another layout than the input is reordered.
class BatchNormKernel final : public DnnlKernel {
 public:
  explicit BatchNormKernel(const KernelRequest& request)
      : DnnlKernel(request),
        epsilon_(static_cast<float>(request.node.attributes.get_float_or("epsilon", 1e-5))) {
    if (request.node.attributes.get_int_or("training_mode", 0) != 0) throw Unsupported{};
    if (request.inputs.size() != 5 || present_outputs(request) != 1) throw Unsupported{};
    const std::string activation = fused::activation(request.node);
    if (!activation.empty() && activation != "Relu") throw Unsupported{};
    fused_relu_ = activation == "Relu";
    lay_out_first_operand(request);
  }

  // In a bf16 graph it reads and writes bf16 where its neighbours do (DenseNet normalizes each
  // join of bf16 convolution outputs before a bf16 convolution).
  TensorLayout preferred_input_layout(size_t i) const override {
    return stored_layout(DnnlKernel::preferred_input_layout(i));
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    return stored_layout(DnnlKernel::preferred_output_layout(o));
  }

 protected:
  // Its preferences come from the request alone. As a probe it is created again with the layouts
  // assigned, so a normalization left plain goes to troupe's row loops (batch_norm_rows.hpp).
  bool layouts_known_unprepared() const override { return true; }

  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const Dims src = to_dims(inputs[0]);
    if (inputs[0].rank() < 2 || src.size() > 5) return false;
    const int64_t channels = src[1];
    for (size_t i = 1; i < 5; ++i)
      if (inputs[i].element_count() != channels) return false;
    const dnnl::memory::desc data_md = tensor_desc(src, input_layout(0));
    const dnnl::memory::desc out_md = tensor_desc(to_dims(outputs[0]), output_layout(0));
    dnnl::memory::desc channel_md = plain_f32({channels});
    auto flags = dnnl::normalization_flags::use_global_stats |
                 dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    if (fused_relu_) flags |= dnnl::normalization_flags::fuse_norm_relu;
    // It normalizes in its source's type (a bf16 one where oneDNN can, else converted to f32);
    // the statistics and the arithmetic are f32 either way. In its source's order, unless that
    // is plain and the destination's is not: oneDNN's plain kernel is not vectorized (CondenseNet's
    // normalizations of a Gather's plain channels before a channels-last convolution: 188 us
    // each), so the source is reordered first and normalized in the destination's order.
    const TensorLayout order = input_layout(0).order().is_plain() && !output_layout(0).is_plain()
                                   ? output_layout(0).order()
                                   : input_layout(0).order();
    auto make = [&](dnnl::memory::data_type type) {
      dnnl::batch_normalization_forward::desc desc(dnnl::prop_kind::forward_inference,
                                                   tensor_desc(src, order, type), epsilon_, flags);
      return dnnl::batch_normalization_forward::primitive_desc(desc, primitive_attributes(),
                                                               cpu_engine());
    };
    const auto pd = create_in(
        input_layout(0).bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32, make);
    primitive_ = Primitive::of<dnnl::batch_normalization_forward>(pd);
    src_ = LayoutBridge(data_md, pd.src_desc(), 0);
    dst_ = LayoutBridge(out_md, pd.dst_desc(), 1);
    scale_ = unbound_memory(channel_md);
    shift_ = unbound_memory(channel_md);
    mean_ = unbound_memory(channel_md);
    variance_ = unbound_memory(channel_md);
    set_impl(pd);
    return true;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    bind(scale_, inputs[1]);
    bind(shift_, inputs[2]);
    bind(mean_, inputs[3]);
    bind(variance_, inputs[4]);
    primitive_.execute(stream_, {{DNNL_ARG_SRC, src_.to_internal(inputs[0], stream_)},
                                 {DNNL_ARG_DST, dst_.output_memory(outputs[0])},
                                 {DNNL_ARG_SCALE, scale_},
                                 {DNNL_ARG_SHIFT, shift_},
                                 {DNNL_ARG_MEAN, mean_},
                                 {DNNL_ARG_VARIANCE, variance_}});
    dst_.from_internal(outputs[0], stream_);
  }

 private:
  float epsilon_;
  bool fused_relu_ = false;
  Primitive primitive_;
  dnnl::memory scale_, shift_, mean_, variance_;
  LayoutBridge src_;
  LayoutBridge dst_;
};

// The normalized axes [axis, rank) are flattened into one, so any axis maps onto oneDNN's
// last-dimension layer normalization of a 2-D tensor.
class LayerNormKernel final : public DnnlKernel {
 public:
  explicit LayerNormKernel(const KernelRequest& request)
      : DnnlKernel(request),
        axis_(request.node.attributes.get_int_or("axis", -1)),
        epsilon_(static_cast<float>(request.node.attributes.get_float_or("epsilon", 1e-5))) {
    // Mean and InvStdDev outputs are not produced by the inference primitive.
    if (present_outputs(request) != 1 || !has_input(1)) throw Unsupported{};
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const int64_t rank = static_cast<int64_t>(inputs[0].rank());
    if (rank == 0 || axis_ < -rank || axis_ >= rank) return false;
    const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= inputs[0][i];
    if (inputs[1].element_count() != inner) return false;
    with_shift_ = has_input(2);
    if (with_shift_ && inputs[2].element_count() != inner) return false;
    dnnl::memory::desc data_md = plain_f32({outer, inner});
    dnnl::memory::desc param_md = plain_f32({inner});
    auto flags = dnnl::normalization_flags::use_scale;
    if (with_shift_) flags = flags | dnnl::normalization_flags::use_shift;
    dnnl::layer_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, data_md,
                                                 epsilon_, flags);
    dnnl::layer_normalization_forward::primitive_desc pd(desc, primitive_attributes(),
                                                         cpu_engine());
    primitive_ = Primitive::of<dnnl::layer_normalization_forward>(pd);
    src_ = unbound_memory(data_md);
    dst_ = unbound_memory(data_md);
    scale_ = unbound_memory(param_md);
    shift_ = unbound_memory(param_md);
    args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}, {DNNL_ARG_SCALE, scale_}};
    if (with_shift_) args_[DNNL_ARG_SHIFT] = shift_;
    set_impl(pd);
    return true;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    bind(src_, inputs[0]);
    bind(scale_, inputs[1]);
    if (with_shift_) bind(shift_, inputs[2]);
    bind(dst_, outputs[0]);
    primitive_.execute(stream_, args_);
  }

 private:
  int64_t axis_;
  float epsilon_;
  bool with_shift_ = false;
  Primitive primitive_;
  dnnl::memory src_, dst_, scale_, shift_;
  std::unordered_map<int, dnnl::memory> args_;
};

}  // namespace

void register_normalization(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "BatchNormalization",
               [](const KernelRequest& request) -> std::unique_ptr<Kernel> {
                 if (auto rows = make_batch_norm_rows(request)) return rows;
                 return make_kernel<BatchNormKernel>(request);
               });
  registry.add(backend_name, backend_priority, "LayerNormalization", make_kernel<LayerNormKernel>);
}

}  // namespace troupe::kernels::onednn
