#include "kernels/dnnl/affine_rows.hpp"

#include "kernels/dnnl/vector_exp.hpp"  // TROUPE_ISA_CLONES

namespace troupe::kernels::onednn {

TROUPE_ISA_CLONES void affine_row(const float* x, float* y, int64_t n, float mean, float a,
                                  float beta, bool relu) {
  if (relu) {
    // Relu as the reference kernel writes it: 0 for a negative value (and -0), NaN kept.
    for (int64_t i = 0; i < n; ++i) {
      const float v = (x[i] - mean) * a + beta;
      y[i] = v < 0.f ? 0.f : v;
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * a + beta;
}

}  // namespace troupe::kernels::onednn
