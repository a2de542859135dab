// Softmax and LogSoftmax (opset 13 semantics: normalized along one axis, default -1) on oneDNN's
// softmax_v2 primitive.
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"

namespace troupe::kernels::onednn {

namespace {

class SoftmaxKernel final : public SrcDstKernel {
 public:
  explicit SoftmaxKernel(const KernelRequest& request)
      : SrcDstKernel(request),
        algorithm_(request.node.op_type == "LogSoftmax" ? dnnl::algorithm::softmax_log
                                                        : dnnl::algorithm::softmax_accurate),
        axis_(request.node.attributes.get_int_or("axis", -1)) {
    if (present_outputs(request) != 1) throw Unsupported{};
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const int64_t rank = static_cast<int64_t>(inputs[0].rank());
    if (rank == 0 || axis_ < -rank || axis_ >= rank) return false;
    const int axis = static_cast<int>(axis_ < 0 ? axis_ + rank : axis_);
    dnnl::memory::desc md = plain_f32(to_dims(inputs[0]));
    dnnl::softmax_v2_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm_, md, md,
                                        axis);
    dnnl::softmax_v2_forward::primitive_desc pd(desc, primitive_attributes(), cpu_engine());
    return adopt<dnnl::softmax_v2_forward>(pd, md, md);
  }

 private:
  dnnl::algorithm algorithm_;
  int64_t axis_;
};

}  // namespace

void register_softmax(KernelRegistry& registry) {
  for (const char* op : {"Softmax", "LogSoftmax"})
    registry.add(backend_name, backend_priority, op, make_kernel<SoftmaxKernel>);
}

}  // namespace troupe::kernels::onednn
