#include "kernels/dnnl/small_rows_product.hpp"

#include <dnnl.hpp>

#include <algorithm>
#include <string>

#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

void SmallRowsProduct::run(const Tensor& a, const Tensor& b, const Tensor* c, Tensor& y,
                           bool accumulate) const {
  float* out = y.data<float>();
  float sgemm_beta = accumulate ? 1.f : 0.f;
  if (c) {
    // beta * C broadcast over [M, N] is prefilled (or added to the residual) before sgemm adds
    // the product to it.
    const Tensor dense = c->contiguous();
    const float* values = dense.data<float>();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const float v = beta * values[(c_rows == 1 ? 0 : i) * c_cols + (c_cols == 1 ? 0 : j)];
        out[i * n + j] = accumulate ? out[i * n + j] + v : v;
      }
    sgemm_beta = 1.f;
  }
  // Leading dimensions of at least 1, as BLAS wants even for an empty K.
  const auto ld = [](int64_t d) { return std::max<int64_t>(d, 1); };
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a.data<float>(),
                 ld(trans_a ? m : k), b.data<float>(), ld(trans_b ? k : n), sgemm_beta, out, ld(n));
  if (status != dnnl_success)
    throw ExecutionError("oneDNN sgemm failed for a " + std::to_string(m) + "x" +
                         std::to_string(k) + " by " + std::to_string(k) + "x" + std::to_string(n) +
                         " product");
  if (relu)
    for (int64_t i = 0; i < m * n; ++i) out[i] = std::max(out[i], 0.f);
}

}  // namespace troupe::kernels::onednn
