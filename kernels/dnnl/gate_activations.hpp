// Sigmoid and tanh over arrays, for the gates of the recurrent kernels: the scalar libm calls took
// a third of an LSTM's time (perf, Zen 5: expm1f, tanhf). These are vectorized, each compiled for
// AVX-512, AVX2 and the baseline and picked at load time, accurate to a few float ulps of the
// exact functions (tanh to ~1e-7 absolute near 0).
#pragma once

#include <cstdint>

namespace troupe::kernels::onednn {

/// v[i] = 1 / (1 + exp(-v[i])) for i < n.
void sigmoid_in_place(float* v, int64_t n);
/// v[i] = tanh(v[i]) for i < n.
void tanh_in_place(float* v, int64_t n);

}  // namespace troupe::kernels::onednn
