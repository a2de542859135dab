// The vectorized sigmoid and tanh of the recurrent kernels (kernels/dnnl/gate_activations) against
// libm over the whole float range that matters, in arrays whose lengths leave vector tails, and at
// the edges: saturation, infinities, NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/dnnl/gate_activations.hpp"

namespace troupe::kernels::onednn {
namespace {

std::vector<float> sweep(float lo, float hi, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * static_cast<float>(i) / (n - 1);
  return v;
}

TEST(GateActivations, SigmoidAndTanhAgreeWithLibmToAFewUlps) {
  for (size_t n : {1, 7, 16, 33, 1001, 20011}) {
    const std::vector<float> x = sweep(-30.f, 30.f, n == 1 ? 2 : n);
    std::vector<float> s = x, t = x;
    sigmoid_in_place(s.data(), static_cast<int64_t>(s.size()));
    tanh_in_place(t.data(), static_cast<int64_t>(t.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const double exact_s = 1.0 / (1.0 + std::exp(-static_cast<double>(x[i])));
      const double exact_t = std::tanh(static_cast<double>(x[i]));
      // Relative for the sigmoid (its small values matter: 1 - z scales a state); absolute for
      // tanh near 0, where 1 - 2 / (1 + e^2x) cancels.
      EXPECT_NEAR(s[i], exact_s, 4e-7 * exact_s + 1e-30) << "sigmoid(" << x[i] << ")";
      EXPECT_NEAR(t[i], exact_t, 2.5e-7) << "tanh(" << x[i] << ")";
    }
  }
}

TEST(GateActivations, SaturateAtTheEdgesAndPropagateNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-inf, -1e30f, -200.f, -88.5f, 88.5f, 200.f, 1e30f, inf, 0.f, -0.f};
  std::vector<float> s = x, t = x;
  sigmoid_in_place(s.data(), static_cast<int64_t>(s.size()));
  tanh_in_place(t.data(), static_cast<int64_t>(t.size()));
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_GE(s[i], 0.f);
    EXPECT_LT(s[i], 1e-37f) << x[i];
    EXPECT_EQ(t[i], -1.f) << x[i];
  }
  for (size_t i = 4; i < 8; ++i) {
    EXPECT_EQ(s[i], 1.f) << x[i];
    EXPECT_EQ(t[i], 1.f) << x[i];
  }
  EXPECT_EQ(s[8], 0.5f);
  EXPECT_EQ(s[9], 0.5f);
  EXPECT_EQ(t[8], 0.f);
  EXPECT_EQ(t[9], 0.f);

  std::vector<float> nan(19, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> nan_t = nan;
  sigmoid_in_place(nan.data(), static_cast<int64_t>(nan.size()));
  tanh_in_place(nan_t.data(), static_cast<int64_t>(nan_t.size()));
  for (size_t i = 0; i < nan.size(); ++i) {
    EXPECT_TRUE(std::isnan(nan[i])) << i;
    EXPECT_TRUE(std::isnan(nan_t[i])) << i;
  }
}

}  // namespace
}  // namespace troupe::kernels::onednn
