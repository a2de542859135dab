#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <memory>

#include "troupe/tensor.hpp"

namespace troupe::kernels::onednn {

/// A constant packed into a primitive's weights layout. The cache entry that finds it by the
/// constant's address holds the constant too, so that the address cannot be taken by another
/// tensor while the entry can be found.
struct SharedWeights {
  dnnl::memory packed;
  const void* source_address = nullptr;
  std::shared_ptr<void> storage;  // packed's buffer where troupe allocated it (large copies)
};

/// The constant `weights` (dense, as `plain` describes it) packed into `packed`, shared by every
/// kernel that packs the same constant into the same layout: the execute streams of a compiled
/// model and each stream's shape specializations pack it once between them instead of once each.
/// An entry lives while a kernel holds it. Thread-safe; the first caller packs on `stream`.
std::shared_ptr<const SharedWeights> shared_packed_weights(const Tensor& weights,
                                                           const dnnl::memory::desc& plain,
                                                           const dnnl::memory::desc& packed,
                                                           const dnnl::stream& stream);

/// The same sharing for a form of the constant that no reorder makes (Winograd's transformed
/// weights): `transform` fills memory of `transformed` from the dense constant, once per
/// constant and descriptor. `transformed` must have other dims than `plain` (it then never
/// matches a reorder's entry, and is never unpacked).
std::shared_ptr<const SharedWeights> shared_transformed_weights(
    const Tensor& weights, const dnnl::memory::desc& plain, const dnnl::memory::desc& transformed,
    const std::function<void(const Tensor&, dnnl::memory&)>& transform);

/// Removes the cache entry for `weights` (and entries no kernel holds any more), dropping the
/// entry's reference to the constant: kernels holding `weights` keep it, later requests for the
/// same constant pack it again. For a compiled model that drops its copy of the constant.
void forget_shared_source(const SharedWeights& weights);

/// The constant `weights` was packed from, rebuilt from the packed copy into a new tensor of
/// `type` and `shape` laid out as `plain` describes. Exact: a reorder between layouts of one
/// data type.
Tensor unpack_shared_weights(const SharedWeights& weights, const dnnl::memory::desc& plain,
                             ElementType type, const Shape& shape);

/// Constants currently packed and shared (for tests).
size_t shared_packed_weights_count();

}  // namespace troupe::kernels::onednn
