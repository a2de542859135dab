#include "kernels/dnnl/eltwise_loop.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/dnnl/team.hpp"
#include "kernels/dnnl/vector_exp.hpp"

namespace troupe::kernels::onednn {

// Tanh, Log, Gelu, Elu and Softplus stay on oneDNN (Tanh from exp_of loses relative accuracy near
// 0, the others need care at their tails).
bool loop_computes(dnnl::algorithm a, float beta) {
  using alg = dnnl::algorithm;
  return a == alg::eltwise_relu || a == alg::eltwise_linear || a == alg::eltwise_abs ||
         a == alg::eltwise_exp || a == alg::eltwise_clip_v2 || a == alg::eltwise_logistic ||
         a == alg::eltwise_swish || a == alg::eltwise_hardswish ||
         (a == alg::eltwise_pow && (beta == 2.f || beta == -1.f));
}

bool loop_outruns_jit(dnnl::algorithm algorithm) {
  using alg = dnnl::algorithm;
  return algorithm == alg::eltwise_logistic || algorithm == alg::eltwise_swish ||
         algorithm == alg::eltwise_exp;
}

namespace {

// sigmoid(x) as the reference kernel writes it, from e^-|x| (accurate for negative x too).
inline float sigmoid_from_exp(float x) {
  const float e = exp_of(-std::fabs(x));
  const float s = 1.0f / (1.0f + e);
  return x >= 0.f ? s : e * s;
}

// Each formula as the reference kernel's (kernels/reference/elementwise.cpp), NaN included.
TROUPE_ISA_CLONES void run_loop(dnnl::algorithm a, float alpha, float beta, bool clip_to_unit,
                                const float* x, float* y, int64_t n) {
  using alg = dnnl::algorithm;
  switch (a) {
    case alg::eltwise_relu:
      if (alpha == 0.f)  // Relu: 0, not 0 * x, for x = -inf
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.f ? 0.f : x[i];
      else
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.f ? alpha * x[i] : x[i];
      break;
    case alg::eltwise_linear:
      if (clip_to_unit)  // HardSigmoid
        for (int64_t i = 0; i < n; ++i) y[i] = std::max(0.f, std::min(1.f, alpha * x[i] + beta));
      else
        for (int64_t i = 0; i < n; ++i) y[i] = alpha * x[i] + beta;
      break;
    case alg::eltwise_abs:
      for (int64_t i = 0; i < n; ++i) y[i] = std::fabs(x[i]);
      break;
    case alg::eltwise_clip_v2:
      for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        if (v < alpha) v = alpha;
        if (v > beta) v = beta;
        y[i] = v;
      }
      break;
    case alg::eltwise_exp:
      // exp_of clamps its input: beyond float's range the result is inf, and below e^-87.3 (the
      // smallest normal float) 0 rather than a subnormal (an absolute error under 1.2e-38).
      // Selects after the exponential rather than branches around it, so that the loop
      // vectorizes.
      for (int64_t i = 0; i < n; ++i) {
        const float e = exp_of(x[i]);
        const float upper = x[i] > 88.7228f ? std::numeric_limits<float>::infinity() : e;
        y[i] = x[i] < -87.3365f ? 0.f : upper;
      }
      break;
    case alg::eltwise_logistic:
      for (int64_t i = 0; i < n; ++i) y[i] = sigmoid_from_exp(x[i]);
      break;
    case alg::eltwise_swish:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * sigmoid_from_exp(alpha * x[i]);
      break;
    case alg::eltwise_hardswish:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * std::max(0.f, std::min(1.f, x[i] / 6.f + 0.5f));
      break;
    default:  // eltwise_pow with exponent 2 or -1 (Pow, Reciprocal): alpha * x^beta, alpha 1
      if (beta == 2.f)
        for (int64_t i = 0; i < n; ++i) y[i] = alpha * (x[i] * x[i]);
      else
        for (int64_t i = 0; i < n; ++i) y[i] = alpha / x[i];
      break;
  }
}

}  // namespace

void run_eltwise_loop(dnnl::algorithm algorithm, float alpha, float beta, bool clip_to_unit,
                      const float* x, float* y, int64_t n) {
  // Chunks of 16 k elements (64 KB, within L2 with their output), shared out to the team when
  // there are several.
  constexpr int64_t chunk = 16384;
  const int64_t chunks = (n + chunk - 1) / chunk;
  for_each_index_if(chunks > 2, chunks, [&](int64_t c) {
    const int64_t first = c * chunk;
    run_loop(algorithm, alpha, beta, clip_to_unit, x + first, y + first,
             std::min(chunk, n - first));
  });
}

}  // namespace troupe::kernels::onednn
