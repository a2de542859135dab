#pragma once

#include <memory>

#include "kernels/kernel_registry.hpp"

namespace troupe::kernels::onednn {

/// Nearest-mode Resize as row copies: YOLO's and FPN's upsampling. A 4-D or 5-D f32 activation
/// whose images and channels keep their counts may stay in the model's activation layout; any
/// other tensor, of any element type, is resized plain. nullptr for other modes.
std::unique_ptr<Kernel> make_nearest_resize(const KernelRequest& request);

}  // namespace troupe::kernels::onednn
