#pragma once

#include <cmath>

namespace troupe::kernels::reference {

// 1 / (1 + e^-x) in a form whose exp never overflows: the Sigmoid op, the fused Sigmoid, and
// Swish's x * Sigmoid(alpha x).
inline double sigmoid_of(double x) {
  return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
}

}  // namespace troupe::kernels::reference
