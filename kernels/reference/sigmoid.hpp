#pragma once

#include <cmath>

namespace troupe::kernels::reference {

// 1 / (1 + e^-x) in a form whose exp never overflows: the Sigmoid op, the fused Sigmoid, and
// Swish's x * Sigmoid(alpha x).
inline double sigmoid_of(double x) {
  return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
}

// log(1 + e^x) in a form whose exp never overflows: Softplus, and Mish's inner function.
inline double softplus_of(double x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

// x * tanh(softplus(x)): the Mish op and the fused Mish.
inline double mish_of(double x) {
  return x * std::tanh(softplus_of(x));
}

}  // namespace troupe::kernels::reference
