// exp(x) written so that loops calling it vectorize, and the attribute that compiles such a loop
// once per ISA: the recurrent kernels' gates and the fused attention's softmax use both.
#pragma once

#include <cstdint>
#include <cstring>

namespace troupe::kernels::onednn {

// exp(x) as 2^k * e^r, r = x - k ln 2 in [-ln2/2, ln2/2], e^r by its degree-6 Taylor polynomial
// (relative error below 2e-7 there). Written without branches or library calls so that the loops
// below vectorize. Inputs are clamped to where the result is a normal float or a huge one (a
// sigmoid or tanh of such inputs is 0 or 1 either way).
// Always inlined: a loop that calls it out of line is not vectorized (GCC left it out of line in
// the element-wise loop's switch, one call per element: a Mamba-like model's 256 Exps of 8192
// elements took 42 us each instead of ~3).
__attribute__((always_inline)) inline float exp_of(float x) {
  x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
  // k = round(x / ln 2) by the 1.5 * 2^23 trick (no rounding instruction needed on SSE2).
  const float shifter = 12582912.0f;
  const float k = (x * 1.44269504088896341f + shifter) - shifter;
  const float r = (x - k * 0.693145751953125f) - k * 1.428606765330187045e-06f;
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // Unsigned: a NaN input makes k NaN, whose conversion is some integer; the result is NaN anyway.
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

}  // namespace troupe::kernels::onednn

// One clone per ISA, picked by an ifunc resolver while the program is relocated. Under TSan that
// resolver is instrumented and runs before TSan's runtime exists: every binary crashed before
// main. TSan builds take the default clone.
#if defined(__SANITIZE_THREAD__)
#define TROUPE_ISA_CLONES
#else
#define TROUPE_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
