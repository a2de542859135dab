// Reference kernels of Softmax and LogSoftmax (opset 13 semantics: normalized along the single
// axis given by the `axis` attribute, default -1).

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/reference/common.hpp"
#include "kernels/reference/element_types.hpp"
#include "kernels/reference/reference.hpp"

namespace troupe::kernels::reference {

namespace {

// The input is seen as [outer, n, inner] with n the size of the softmax axis. Subtracting the
// maximum before exponentiating keeps exp() from overflowing for large inputs.
void softmax_along_axis(const Node& node, const std::vector<Tensor>& in, std::vector<Tensor>& out,
                        bool logarithm) {
  dispatch_floating(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::vector<int64_t>& dims = in[0].shape().dims();
    const size_t axis = normalize_axis(node, node.attributes.get_int_or("axis", -1), dims.size());
    int64_t outer = 1;
    int64_t inner = 1;
    for (size_t d = 0; d < axis; ++d) outer *= dims[d];
    for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
    const int64_t n = dims[axis];

    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * n * inner + i;
        double max = -INFINITY;
        for (int64_t k = 0; k < n; ++k) max = std::max(max, load(x[base + k * inner]));
        double sum = 0;
        for (int64_t k = 0; k < n; ++k) sum += std::exp(load(x[base + k * inner]) - max);
        for (int64_t k = 0; k < n; ++k) {
          const double shifted = load(x[base + k * inner]) - max;
          y[base + k * inner] =
              store<T>(logarithm ? shifted - std::log(sum) : std::exp(shifted) / sum);
        }
      }
    }
  });
}

void softmax(const Node& node, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  softmax_along_axis(node, in, out, false);
}

void log_softmax(const Node& node, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  softmax_along_axis(node, in, out, true);
}

}  // namespace

void register_softmax(KernelRegistry& registry) {
  registry.add("reference", 0, "Softmax",
               [](const KernelRequest& r) { return make_reference_kernel(r.node, &softmax); });
  registry.add("reference", 0, "LogSoftmax",
               [](const KernelRequest& r) { return make_reference_kernel(r.node, &log_softmax); });
}

}  // namespace troupe::kernels::reference
