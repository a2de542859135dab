#pragma once

// MaxPool with its Indices output and MaxUnpool on troupe's own loops (max_pool_indices.cpp).

#include <memory>

#include "kernels/kernel_registry.hpp"

namespace troupe::kernels::onednn {

/// The kernel for a MaxPool `request` that asks for Indices or is dilated (plain f32; oneDNN
/// pools dilated windows on its reference kernel), or nullptr; the MaxPool factory tries it first.
std::unique_ptr<Kernel> make_max_pool_indices(const KernelRequest& request);

}  // namespace troupe::kernels::onednn
