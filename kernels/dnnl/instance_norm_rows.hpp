#pragma once

// InstanceNormalization of 3-D f32 tensors in plain layout (GroupNorm's export) on troupe's own
// row loops (instance_norm_rows.cpp); the InstanceNormalization factory tries it first.

#include <memory>

#include "kernels/kernel_registry.hpp"

namespace troupe::kernels::onednn {

/// The kernel for `request`, or nullptr when it is not a 3-D plain f32 normalization.
std::unique_ptr<Kernel> make_instance_norm_rows(const KernelRequest& request);

}  // namespace troupe::kernels::onednn
