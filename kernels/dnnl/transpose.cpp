// Transpose as a oneDNN reorder: the input is described with the output's dims and the input's
// strides permuted, so the reorder walks it in output order and writes the output densely.
#include <numeric>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"

namespace troupe::kernels::onednn {

namespace {

class TransposeKernel final : public SrcDstKernel {
 public:
  explicit TransposeKernel(const KernelRequest& request)
      : SrcDstKernel(request), perm_(request.node.attributes.get_ints_or("perm", {})) {
    if (request.inputs.size() != 1 || present_outputs(request) != 1) throw Unsupported{};
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const size_t rank = inputs[0].rank();
    if (rank > DNNL_MAX_NDIMS) return false;
    std::vector<int64_t> perm = perm_;
    if (perm.empty()) {  // default: reverse the axes
      perm.resize(rank);
      std::iota(perm.rbegin(), perm.rend(), int64_t{0});
    }
    if (perm.size() != rank) return false;
    const Dims in = to_dims(inputs[0]);
    if (rank == 0) {
      const dnnl::memory::desc md = plain_f32(in);
      return adopt<dnnl::reorder>(dnnl::reorder::primitive_desc(cpu_engine(), md, cpu_engine(), md),
                                  md, md);
    }
    Dims in_strides(rank, 1);
    for (size_t i = rank - 1; i > 0; --i) in_strides[i - 1] = in_strides[i] * in[i];
    Dims out(rank);
    Dims strides(rank);
    std::vector<bool> seen(rank, false);
    for (size_t i = 0; i < rank; ++i) {
      if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(rank) ||
          seen[static_cast<size_t>(perm[i])])
        return false;
      seen[static_cast<size_t>(perm[i])] = true;
      out[i] = in[static_cast<size_t>(perm[i])];
      strides[i] = in_strides[static_cast<size_t>(perm[i])];
    }
    if (Shape(std::vector<int64_t>(out.begin(), out.end())) != outputs[0]) return false;
    const dnnl::memory::desc src(out, dnnl::memory::data_type::f32, strides);
    const dnnl::memory::desc dst = plain_f32(out);
    return adopt<dnnl::reorder>(dnnl::reorder::primitive_desc(cpu_engine(), src, cpu_engine(), dst),
                                src, dst);
  }

 private:
  std::vector<int64_t> perm_;
};

}  // namespace

void register_transpose(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "Transpose", make_kernel<TransposeKernel>);
}

}  // namespace troupe::kernels::onednn
