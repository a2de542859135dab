#pragma once

#include <memory>

#include "kernels/kernel_registry.hpp"

namespace troupe::kernels::onednn {

/// Linear or cubic Resize of a plain f32 tensor of rank 2 and more, any coordinate transform, as
/// separable passes over the planes of its last two axes: bilinear align_corners and bicubic
/// upsampling. nullptr for other modes, types and layouts.
std::unique_ptr<Kernel> make_interpolating_resize(const KernelRequest& request);

}  // namespace troupe::kernels::onednn
