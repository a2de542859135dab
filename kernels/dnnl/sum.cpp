// Sum and Mean of any number of f32 tensors of one shape on oneDNN's sum primitive (Mean: each
// input scaled by 1/n). Inputs that broadcast run on the reference kernel; a single input is a
// copy (scaled by 1 either way).
#include <vector>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"

namespace troupe::kernels::onednn {

namespace {

class SumKernel final : public DnnlKernel {
 public:
  explicit SumKernel(const KernelRequest& request)
      : DnnlKernel(request), mean_(request.node.op_type == "Mean") {
    if (request.inputs.empty() || present_outputs(request) != 1) throw Unsupported{};
    for (size_t i = 0; i < request.inputs.size(); ++i)
      if (!has_input(i)) throw Unsupported{};
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const Dims y = to_dims(outputs[0]);
    for (const Shape& s : inputs)
      if (to_dims(s) != y) return false;  // a broadcast: the reference's
    const dnnl::memory::desc md = plain_f32(y);
    const float scale = mean_ ? 1.f / static_cast<float>(inputs.size()) : 1.f;
    const std::vector<dnnl::memory::desc> sources(inputs.size(), md);
    dnnl::sum::primitive_desc pd(md, std::vector<float>(inputs.size(), scale), sources,
                                 cpu_engine(), primitive_attributes());
    primitive_ = Primitive::of<dnnl::sum>(pd);
    sources_.clear();
    for (size_t i = 0; i < inputs.size(); ++i) sources_.push_back(unbound_memory(md));
    dst_ = unbound_memory(md);
    set_impl(pd);
    return true;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    std::unordered_map<int, dnnl::memory> args;
    for (size_t i = 0; i < inputs.size(); ++i) {
      bind(sources_[i], inputs[i]);
      args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = sources_[i];
    }
    bind(dst_, outputs[0]);
    args[DNNL_ARG_DST] = dst_;
    primitive_.execute(stream_, args);
  }

 private:
  bool mean_;
  Primitive primitive_;
  std::vector<dnnl::memory> sources_;
  dnnl::memory dst_;
};

}  // namespace

void register_sum(KernelRegistry& registry) {
  for (const char* op : {"Sum", "Mean"})
    registry.add(backend_name, backend_priority, op, make_kernel<SumKernel>);
}

}  // namespace troupe::kernels::onednn
