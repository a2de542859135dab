// Reference kernel of ScaledDotProductAttention (engine/ops/attention.hpp), by its definition: for
// each batch and row of Q, the scaled scores plus the mask, their softmax and its product with V,
// all in double.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/ops/attention.hpp"
#include "kernels/reference/common.hpp"
#include "kernels/reference/element_types.hpp"
#include "kernels/reference/reference.hpp"

namespace troupe::kernels::reference {

namespace {

void scaled_dot_product_attention(const Node& node, const std::vector<Tensor>& in,
                                  std::vector<Tensor>& out) {
  const Tensor& mask = optional_input(in, 3);
  const std::vector<int64_t> mask_dims =
      mask.empty() ? std::vector<int64_t>{} : mask.shape().dims();
  const attention::Geometry g =
      attention::geometry(node, in[0].shape().dims(), in[1].shape().dims(), in[2].shape().dims(),
                          mask.empty() ? nullptr : &mask_dims);
  require_output_size(node, out[0], g.batches * g.m * g.d);
  for (size_t i = 1; i < in.size(); ++i)
    if (!in[i].empty() && in[i].element_type() != in[0].element_type())
      fail(node, "inputs have different element types");
  const double scale = attention::scale(node);
  dispatch_floating(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* q = in[0].data<T>();
    const T* kt = in[1].data<T>();
    const T* v = in[2].data<T>();
    const T* mk = g.has_mask ? mask.data<T>() : nullptr;
    T* y = out[0].data<T>();
    const size_t qr = g.q.dims.size(), kr = g.kt.dims.size(), vr = g.v.dims.size();
    const int64_t q_row = g.q.strides[qr - 2], q_col = g.q.strides[qr - 1];
    const int64_t k_row = g.kt.strides[kr - 2], k_col = g.kt.strides[kr - 1];
    const int64_t v_row = g.v.strides[vr - 2], v_col = g.v.strides[vr - 1];
    std::vector<double> p(static_cast<size_t>(g.n));
    for (int64_t b = 0; b < g.batches; ++b) {
      const auto [qo, ko, vo, mo, yo] = g.offsets(b);
      for (int64_t m = 0; m < g.m; ++m) {
        for (int64_t n = 0; n < g.n; ++n) {
          double s = 0;
          for (int64_t k = 0; k < g.k; ++k)
            s += load(q[qo + m * q_row + k * q_col]) * load(kt[ko + k * k_row + n * k_col]);
          s *= scale;
          if (mk) s += load(mk[mo + m * g.mask_row + n * g.mask_col]);
          p[static_cast<size_t>(n)] = s;
        }
        const double max = g.n > 0 ? *std::max_element(p.begin(), p.end()) : 0.0;
        double sum = 0;
        for (double& e : p) sum += (e = std::exp(e - max));
        for (int64_t d = 0; d < g.d; ++d) {
          double acc = 0;
          for (int64_t n = 0; n < g.n; ++n)
            acc += p[static_cast<size_t>(n)] * load(v[vo + n * v_row + d * v_col]);
          // No keys (N = 0): the product with an empty V is 0, as unfused.
          y[yo + m * g.y_row + d * g.y_col] = store<T>(g.n == 0 ? 0.0 : acc / sum);
        }
      }
    }
  });
}

}  // namespace

void register_attention(KernelRegistry& registry) {
  registry.add("reference", 0, attention::op_type, [](const KernelRequest& r) {
    return make_reference_kernel(r.node, &scaled_dot_product_attention);
  });
}

}  // namespace troupe::kernels::reference
