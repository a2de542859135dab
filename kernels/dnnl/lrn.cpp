// LRN (local response normalization across channels, as AlexNet and GoogLeNet in the ONNX model
// zoo have it) on oneDNN's lrn primitive, in the activation layout between convolutions. ONNX's
// window [c - floor((size-1)/2), c + ceil((size-1)/2)] is oneDNN's centred one for odd sizes;
// even sizes, and those oneDNN has no JIT kernel for, run on the reference kernel.
#include <vector>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"

namespace troupe::kernels::onednn {

namespace {

class LrnKernel final : public SrcDstKernel {
 public:
  explicit LrnKernel(const KernelRequest& request)
      : SrcDstKernel(request),
        size_(request.node.attributes.get_int_or("size", 0)),
        alpha_(static_cast<float>(request.node.attributes.get_float_or("alpha", 1e-4))),
        beta_(static_cast<float>(request.node.attributes.get_float_or("beta", 0.75))),
        bias_(static_cast<float>(request.node.attributes.get_float_or("bias", 1.0))) {
    if (size_ < 1 || size_ % 2 == 0 || present_outputs(request) != 1) throw Unsupported{};
    lay_out_first_operand(request);
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const Dims x = to_dims(inputs[0]);
    if (x.size() < 3 || x.size() > 5 || to_dims(outputs[0]) != x) return false;
    if (input_layout(0).bf16 || output_layout(0).bf16) return false;
    const dnnl::memory::desc src_md = tensor_desc(x, input_layout(0));
    const dnnl::memory::desc dst_md = tensor_desc(x, output_layout(0));
    // oneDNN's JIT LRN reads channel-blocked or channels-last data (size 5 only, AlexNet's and
    // GoogLeNet's): a plain tensor is normalized in the blocked layout, reordered around it.
    std::vector<TensorLayout> layouts;
    if (!input_layout(0).is_plain()) layouts.push_back(input_layout(0));
    if (x.size() == 4) {
      layouts.push_back(TensorLayout::blocked(native_channel_block()));
      layouts.push_back(TensorLayout::channels_last_order());
    }
    for (const TensorLayout& layout : layouts) {
      try {
        dnnl::lrn_forward::desc desc(dnnl::prop_kind::forward_inference,
                                     dnnl::algorithm::lrn_across_channels, tensor_desc(x, layout),
                                     size_, alpha_, beta_, bias_);
        dnnl::lrn_forward::primitive_desc pd(desc, primitive_attributes(), cpu_engine());
        if (!is_reference(pd)) return adopt<dnnl::lrn_forward>(pd, src_md, dst_md);
      } catch (const dnnl::error&) {
        // not in this layout
      }
    }
    return false;  // troupe's reference kernel
  }

 private:
  int64_t size_;
  float alpha_, beta_, bias_;
};

}  // namespace

void register_lrn(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "LRN", make_kernel<LrnKernel>);
}

}  // namespace troupe::kernels::onednn
