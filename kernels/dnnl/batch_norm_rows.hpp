#pragma once

// Inference-mode BatchNormalization of plain f32 tensors (1-D convolution nets, BatchNorm1d over
// features, 3-D convolutions, and images that stay plain) on troupe's own row loops
// (batch_norm_rows.cpp); the BatchNormalization factory tries it first.

#include <memory>

#include "kernels/kernel_registry.hpp"

namespace troupe::kernels::onednn {

/// The kernel for `request`, or nullptr when it is not such a normalization.
std::unique_ptr<Kernel> make_batch_norm_rows(const KernelRequest& request);

}  // namespace troupe::kernels::onednn
