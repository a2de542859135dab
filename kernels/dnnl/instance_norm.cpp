// InstanceNormalization on oneDNN's batch normalization: one instance [1, C, spatial...] is a
// batch of one, whose per-channel statistics are the instance's, so the primitive computes them
// (forward_training: mean and variance from the data) and normalizes with scale and bias. Each
// instance of a batch runs in turn over its own slice of the tensor, in the activation layout the
// graph compiler keeps between convolutions (a style-transfer or CycleGAN generator normalizes
// after every convolution). GroupNorm's export, 3-D and plain, runs on instance_norm_rows.cpp.
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/instance_norm_rows.hpp"

namespace troupe::kernels::onednn {

namespace {

class InstanceNormKernel final : public DnnlKernel {
 public:
  explicit InstanceNormKernel(const KernelRequest& request)
      : DnnlKernel(request),
        epsilon_(static_cast<float>(request.node.attributes.get_float_or("epsilon", 1e-5))) {
    if (request.inputs.size() != 3 || present_outputs(request) != 1) throw Unsupported{};
    lay_out_first_operand(request);
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const Dims src = to_dims(inputs[0]);
    if (inputs[0].rank() < 3 || src.size() > 5 || to_dims(outputs[0]) != src) return false;
    const int64_t channels = src[1];
    if (inputs[1].element_count() != channels || inputs[2].element_count() != channels)
      return false;
    // The instances are normalized in the input's layout (f32); a bf16 or differently laid out
    // output is converted after.
    const TensorLayout layout = input_layout(0).order();
    Dims instance = src;
    instance[0] = 1;
    // A plain instance of any rank as [1, C, spatial, 1]: oneDNN's JIT normalization takes 4-D
    // plain tensors, and answers 3-D ones (a wav2vec2 feature extractor's GroupNorm over
    // [1,512,3199]: 44 ms) with its reference kernel.
    if (layout.is_plain()) {
      int64_t spatial = 1;
      for (size_t d = 2; d < src.size(); ++d) spatial *= src[d];
      instance = {1, channels, spatial, 1};
    }
    batch_ = src[0];
    const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    dnnl::batch_normalization_forward::desc desc(dnnl::prop_kind::forward_training,
                                                 tensor_desc(instance, layout), epsilon_, flags);
    dnnl::batch_normalization_forward::primitive_desc pd(desc, primitive_attributes(),
                                                         cpu_engine());
    if (is_reference(pd)) return false;  // troupe's reference kernel is no slower
    primitive_ = Primitive::of<dnnl::batch_normalization_forward>(pd);
    instance_bytes_ = pd.src_desc().get_size();
    src_ = LayoutBridge(tensor_desc(src, input_layout(0)), tensor_desc(src, layout), 0);
    dst_ = LayoutBridge(tensor_desc(src, output_layout(0)), tensor_desc(src, layout), 1);
    instance_src_ = unbound_memory(pd.src_desc());
    instance_dst_ = unbound_memory(pd.dst_desc());
    const dnnl::memory::desc channel_md = plain_f32({channels});
    scale_ = unbound_memory(channel_md);
    shift_ = unbound_memory(channel_md);
    mean_ = dnnl::memory(pd.mean_desc(), cpu_engine());
    variance_ = dnnl::memory(pd.variance_desc(), cpu_engine());
    set_impl(pd);
    return true;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    bind(scale_, inputs[1]);
    bind(shift_, inputs[2]);
    auto* src = static_cast<char*>(src_.to_internal(inputs[0], stream_).get_data_handle());
    auto* dst = static_cast<char*>(dst_.output_memory(outputs[0]).get_data_handle());
    for (int64_t n = 0; n < batch_; ++n) {
      instance_src_.set_data_handle(src + n * instance_bytes_);
      instance_dst_.set_data_handle(dst + n * instance_bytes_);
      primitive_.execute(stream_, {{DNNL_ARG_SRC, instance_src_},
                                   {DNNL_ARG_DST, instance_dst_},
                                   {DNNL_ARG_SCALE, scale_},
                                   {DNNL_ARG_SHIFT, shift_},
                                   {DNNL_ARG_MEAN, mean_},
                                   {DNNL_ARG_VARIANCE, variance_}});
    }
    dst_.from_internal(outputs[0], stream_);
  }

 private:
  float epsilon_;
  int64_t batch_ = 1;
  size_t instance_bytes_ = 0;  // one instance in the normalizing layout (a batch's n-th slice)
  Primitive primitive_;
  LayoutBridge src_;
  LayoutBridge dst_;
  dnnl::memory instance_src_, instance_dst_;
  dnnl::memory scale_, shift_, mean_, variance_;
};

}  // namespace

void register_instance_normalization(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "InstanceNormalization",
               [](const KernelRequest& request) -> std::unique_ptr<Kernel> {
                 if (auto rows = make_instance_norm_rows(request)) return rows;
                 return make_kernel<InstanceNormKernel>(request);
               });
}

}  // namespace troupe::kernels::onednn
