#pragma once

// The per-row affine map the normalizations on troupe's own loops end with.

#include <cstdint>

namespace troupe::kernels::onednn {

/// y[i] = (x[i] - mean) * a + beta for i in [0, n), then max(y[i], 0) when `relu`. `x` may be `y`.
///
/// (x - mean) first: a row far from 0 (values near 1000, spread 2) would lose its digits in
/// x * a + (beta - mean * a), two large terms cancelling.
void affine_row(const float* x, float* y, int64_t n, float mean, float a, float beta, bool relu);

}  // namespace troupe::kernels::onednn
