#include "kernels/kernel_registry.hpp"

#include <algorithm>
#include <optional>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/omp_threads.hpp"
#include "kernels/reference/reference.hpp"

namespace troupe::kernels {

namespace {

class ReferenceKernel final : public Kernel {
 public:
  ReferenceKernel(const Node& node, ReferenceFn fn) : node_(node), fn_(fn) {}
  void execute(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    fn_(node_, inputs, outputs);
  }
  std::string implementation() const override { return "ref"; }

 private:
  Node node_;
  ReferenceFn fn_;
};

}  // namespace

std::unique_ptr<Kernel> make_reference_kernel(const Node& node, ReferenceFn fn) {
  return std::make_unique<ReferenceKernel>(node, fn);
}

void register_reference_kernels(KernelRegistry& registry) {
  reference::register_elementwise(registry);
  reference::register_softmax(registry);
  reference::register_linear_algebra(registry);
  reference::register_shape(registry);
  reference::register_reduction(registry);
  reference::register_convolution(registry);
  reference::register_pooling(registry);
  reference::register_normalization(registry);
  reference::register_resize(registry);
  reference::register_recurrent(registry);
  reference::register_quantization(registry);
  reference::register_loss(registry);
  reference::register_selection(registry);
  reference::register_signal(registry);
  reference::register_sampling(registry);
  reference::register_training(registry);
  reference::register_text(registry);
  reference::register_attention(registry);
}

KernelRegistry& KernelRegistry::instance() {
  static KernelRegistry registry;
  return registry;
}

KernelRegistry::KernelRegistry() {
  register_reference_kernels(*this);
  register_dnnl_kernels(*this);
}

void KernelRegistry::add(const std::string& backend, int priority, const std::string& op_type,
                         KernelFactory factory) {
  auto& entries = by_op_[op_type];
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [&](const Entry& e) { return e.backend == backend; }),
                entries.end());
  entries.push_back({backend, priority, std::move(factory)});
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.priority > b.priority; });
}

std::unique_ptr<Kernel> KernelRegistry::create(
    const KernelRequest& request, const std::vector<std::string>& allowed_backends) const {
  auto it = by_op_.find(request.node.op_type);
  if (it == by_op_.end()) return nullptr;
  // Reference kernels read and write plain tensors only: a request with another layout is for a
  // backend that said it handles that layout, and if that backend declines, nothing else may
  // take it (the caller then assigns plain layouts).
  bool laid_out = false;
  for (const TensorLayout& l : request.input_layouts) laid_out = laid_out || !l.is_plain();
  for (const TensorLayout& l : request.output_layouts) laid_out = laid_out || !l.is_plain();
  // oneDNN fixes a primitive's thread count when it is created (kernels/omp_threads.hpp).
  std::optional<detail::ScopedOmpThreads> threads;
  if (request.threads > 0) threads.emplace(request.threads);
  for (const Entry& e : it->second) {
    if (laid_out && e.backend == "reference") continue;
    if (!allowed_backends.empty() && std::find(allowed_backends.begin(), allowed_backends.end(),
                                               e.backend) == allowed_backends.end())
      continue;
    if (auto kernel = e.factory(request)) {
      kernel->set_threads(request.threads);
      return kernel;
    }
  }
  return nullptr;
}

std::unique_ptr<Kernel> KernelRegistry::create_with(const std::string& backend,
                                                    const KernelRequest& request) const {
  return create(request, {backend});
}

bool KernelRegistry::has_op(const std::string& op_type) const {
  return by_op_.count(op_type) != 0;
}

std::vector<std::string> KernelRegistry::op_types(const std::string& backend) const {
  std::vector<std::string> out;
  for (const auto& [op, entries] : by_op_)
    for (const Entry& e : entries)
      if (e.backend == backend) out.push_back(op);
  return out;
}

}  // namespace troupe::kernels
