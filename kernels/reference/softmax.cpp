// Reference kernels of Softmax, LogSoftmax and Hardmax: opset 13 semantics (along the single axis
// given by the `axis` attribute, default -1), and the earlier 2-D coercion when the node carries an
// `opset` attribute below 13.

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
enum class Normalization { softmax, log_softmax, hardmax };

void softmax_along_axis(const Node& node, const std::vector<Tensor>& in, std::vector<Tensor>& out,
                        Normalization kind) {
  require_output_size(node, out[0], in[0].size());
  dispatch_floating(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::vector<int64_t>& dims = in[0].shape().dims();
    // Before opset 13 the input is coerced to 2-D at `axis` (default 1) and every row normalized:
    // the softmax runs over all dimensions from `axis` on. The ONNX reader records the opset.
    const bool coerce_2d = node.attributes.get_int_or("opset", 13) < 13;
    const size_t axis =
        normalize_axis(node, node.attributes.get_int_or("axis", coerce_2d ? 1 : -1), dims.size());
    int64_t outer = 1;
    int64_t n = 1;
    int64_t inner = 1;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (d < axis)
        outer *= dims[d];
      else if (d == axis || coerce_2d)
        n *= dims[d];
      else
        inner *= dims[d];
    }

    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * n * inner + i;
        double max = 0;
        int64_t first_max = 0;
        for (int64_t k = 0; k < n; ++k) {
          const double v = load(x[base + k * inner]);
          if (k == 0 || v > max) {
            max = v;
            first_max = k;
          }
        }
        if (kind == Normalization::hardmax) {
          // 1 at the first occurrence of the maximum, 0 elsewhere.
          for (int64_t k = 0; k < n; ++k)
            y[base + k * inner] = store<T>(k == first_max ? 1.0 : 0.0);
          continue;
        }
        double sum = 0;
        for (int64_t k = 0; k < n; ++k) sum += std::exp(load(x[base + k * inner]) - max);
        for (int64_t k = 0; k < n; ++k) {
          const double shifted = load(x[base + k * inner]) - max;
          y[base + k * inner] =
              store<T>(kind == Normalization::log_softmax ? shifted - std::log(sum)
                                                          : std::exp(shifted) / sum);
        }
      }
    }
  });
}

void softmax(const Node& node, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  softmax_along_axis(node, in, out, Normalization::softmax);
}

void log_softmax(const Node& node, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  softmax_along_axis(node, in, out, Normalization::log_softmax);
}

void hardmax(const Node& node, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  softmax_along_axis(node, in, out, Normalization::hardmax);
}

}  // namespace

void register_softmax(KernelRegistry& registry) {
  registry.add("reference", 0, "Softmax",
               [](const KernelRequest& r) { return make_reference_kernel(r.node, &softmax); });
  registry.add("reference", 0, "LogSoftmax",
               [](const KernelRequest& r) { return make_reference_kernel(r.node, &log_softmax); });
  registry.add("reference", 0, "Hardmax",
               [](const KernelRequest& r) { return make_reference_kernel(r.node, &hardmax); });
}

}  // namespace troupe::kernels::reference
