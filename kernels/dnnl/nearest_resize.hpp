#pragma once

#include <memory>

#include "kernels/kernel_registry.hpp"

namespace troupe::kernels::onednn {

/// Nearest-mode Resize of a plain tensor of any element type as row copies: YOLO's and FPN's
/// upsampling. nullptr for other modes and layouts.
std::unique_ptr<Kernel> make_nearest_resize(const KernelRequest& request);

}  // namespace troupe::kernels::onednn
