// Softmax and LogSoftmax (opset 13 semantics: normalized along one axis, default -1) on oneDNN's
// softmax_v2 primitive, or, along an inner axis where oneDNN would run its reference
// implementation, and along last axes of at most 32 elements, on troupe's own loops
// (strided_softmax.hpp).
#include <functional>
#include <numeric>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/strided_softmax.hpp"

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
    const std::vector<int64_t>& dims = inputs[0].dims();
    outer_ = std::accumulate(dims.begin(), dims.begin() + axis, int64_t{1}, std::multiplies<>());
    axis_size_ = dims[axis];
    inner_ = std::accumulate(dims.begin() + axis + 1, dims.end(), int64_t{1}, std::multiplies<>());
    short_rows_ = inner_ == 1 && axis_size_ <= max_short_row && outer_ >= 16;
    if (short_rows_) {
      set_impl("short_rows_softmax");
      return true;
    }
    dnnl::memory::desc md = plain_f32(to_dims(inputs[0]));
    dnnl::softmax_v2_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm_, md, md,
                                        axis);
    dnnl::softmax_v2_forward::primitive_desc pd(desc, primitive_attributes(), cpu_engine());
    strided_ = is_reference(pd) && inner_ > 1;
    if (!strided_) return adopt<dnnl::softmax_v2_forward>(pd, md, md);
    set_impl("strided_softmax");
    return true;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    if (short_rows_)
      return short_rows_softmax(inputs[0].data<float>(), outputs[0].data<float>(), outer_,
                                axis_size_, algorithm_ == dnnl::algorithm::softmax_log);
    if (!strided_) return SrcDstKernel::run(inputs, outputs);
    strided_softmax(inputs[0].data<float>(), outputs[0].data<float>(), outer_, axis_size_, inner_,
                    algorithm_ == dnnl::algorithm::softmax_log);
  }

 private:
  dnnl::algorithm algorithm_;
  int64_t axis_;
  bool strided_ = false;     // oneDNN would run its reference: troupe's loop instead
  bool short_rows_ = false;  // rows too short for oneDNN's loop: troupe's transposed blocks
  int64_t outer_ = 1;
  int64_t axis_size_ = 1;
  int64_t inner_ = 1;
};

}  // namespace

void register_softmax(KernelRegistry& registry) {
  for (const char* op : {"Softmax", "LogSoftmax"})
    registry.add(backend_name, backend_priority, op, make_kernel<SoftmaxKernel>);
}

}  // namespace troupe::kernels::onednn
