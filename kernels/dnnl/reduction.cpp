// ReduceMean, ReduceSum, ReduceMax, ReduceMin and ReduceProd on oneDNN's reduction primitive, with
// the axes known when the kernel is prepared (an attribute or a constant input). The output is
// described with the reduced axes kept as 1: keepdims changes only its shape, not its memory.
#include "kernels/reference/reduction.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"

namespace troupe::kernels::onednn {

namespace {

dnnl::algorithm algorithm_of(const std::string& op) {
  if (op == "ReduceMean") return dnnl::algorithm::reduction_mean;
  if (op == "ReduceSum") return dnnl::algorithm::reduction_sum;
  if (op == "ReduceMax") return dnnl::algorithm::reduction_max;
  if (op == "ReduceMin") return dnnl::algorithm::reduction_min;
  return dnnl::algorithm::reduction_mul;  // ReduceProd
}

class ReductionKernel final : public SrcDstKernel {
 public:
  explicit ReductionKernel(const KernelRequest& request)
      : SrcDstKernel(request), algorithm_(algorithm_of(request.node.op_type)) {
    if (present_outputs(request) != 1) throw Unsupported{};
    // Axes given at run time would need a primitive per run: the reference takes them.
    if (has_input(1) && constant(1) == nullptr) throw Unsupported{};
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const size_t rank = inputs[0].rank();
    if (rank == 0 || rank > DNNL_MAX_NDIMS) return false;
    std::vector<Tensor> given = {Tensor()};
    if (has_input(1)) given.push_back(*constant(1));
    const std::vector<bool> reduced = reference::reduced_dims(node_, given, rank);
    const Dims src = to_dims(inputs[0]);
    Dims dst = src;
    for (size_t d = 0; d < rank; ++d)
      if (reduced[d]) dst[d] = 1;
    if (dst == src || outputs[0].element_count() !=
                          Shape(std::vector<int64_t>(dst.begin(), dst.end())).element_count())
      return false;  // nothing reduced: a copy, which the reference does
    const dnnl::memory::desc src_md = plain_f32(src);
    const dnnl::memory::desc dst_md = plain_f32(dst);
    dnnl::reduction::desc desc(algorithm_, src_md, dst_md, 0.0f, 0.0f);
    dnnl::reduction::primitive_desc pd(desc, primitive_attributes(), cpu_engine());
    return adopt<dnnl::reduction>(pd, src_md, dst_md);
  }

 private:
  dnnl::algorithm algorithm_;
};

}  // namespace

void register_reduction(KernelRegistry& registry) {
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"})
    registry.add(backend_name, backend_priority, op, make_kernel_for_data<ReductionKernel>);
}

}  // namespace troupe::kernels::onednn
