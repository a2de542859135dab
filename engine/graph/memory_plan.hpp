#pragma once

#include <cstddef>
#include <vector>

#include "troupe/model.hpp"

namespace troupe::detail {

/// Where the intermediate values of a graph live during a run. Values whose lifetimes (from the
/// node writing them to the last node reading them, in execution order) do not overlap share a
/// buffer, so a deep network needs a few activation buffers instead of one per node.
struct MemoryPlan {
  static constexpr int unplanned = -1;
  /// Per ValueId: the buffer the value lives in, or `unplanned` for values the executor does not
  /// own (model inputs and outputs, constants) and those whose size is unknown.
  std::vector<int> buffer_of;
  /// Size of each buffer in bytes.
  std::vector<size_t> buffer_bytes;
  /// Per ValueId: the planned value whose memory this one is a view of (the output of a
  /// Reshape, Flatten, Squeeze, Unsqueeze or Identity shares its input's buffer: those kernels
  /// then copy nothing), else the value itself.
  std::vector<ValueId> storage_of;
  /// Bytes of the planned values if each had a buffer of its own (views excluded).
  size_t unshared_bytes = 0;

  size_t total_bytes() const;
};

/// Plans the intermediate values of a validated model with static shapes. A node's outputs never
/// share a buffer with its own inputs (kernels do not work in place), except a view's output,
/// which is its input's memory: the buffer then lives until the last reader of either.
/// `stored_types`, when given, has per ValueId the type each value is stored in (bf16 between bf16
/// kernels, else its own); without it, each value's own type.
MemoryPlan plan_memory(const Model& model, const std::vector<ElementType>& stored_types = {});

}  // namespace troupe::detail
