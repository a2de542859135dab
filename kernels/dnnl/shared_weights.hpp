#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <memory>

#include "troupe/tensor.hpp"

namespace troupe::kernels::onednn {

/// A constant packed into a primitive's weights layout, and the constant it was packed from (held
/// so that its memory, the cache key, cannot be reused for another tensor while this lives).
struct SharedWeights {
  dnnl::memory packed;
  Tensor source;
};

/// The constant `weights` (dense, as `plain` describes it) packed into `packed`, shared by every
/// kernel that packs the same constant into the same layout: the execute streams of a compiled
/// model and each stream's shape specializations pack it once between them instead of once each.
/// An entry lives while a kernel holds it. Thread-safe; the first caller packs on `stream`.
std::shared_ptr<const SharedWeights> shared_packed_weights(const Tensor& weights,
                                                           const dnnl::memory::desc& plain,
                                                           const dnnl::memory::desc& packed,
                                                           const dnnl::stream& stream);

/// Constants currently packed and shared (for tests).
size_t shared_packed_weights_count();

}  // namespace troupe::kernels::onednn
