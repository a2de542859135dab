#pragma once

#include <cstddef>
#include <vector>

#include "kernels/kernel.hpp"
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
  /// Per ValueId: the planned value whose memory this one is part of, else the value itself. The
  /// output of a Reshape, Flatten, Squeeze, Unsqueeze or Identity is its input's memory (those
  /// kernels then copy nothing); an input of a Concat whose slice of the output is one contiguous
  /// run is written by its producer straight into that slice ("hosted"), and a Concat whose
  /// inputs all sit in order in another value's memory is a view of that run (DenseNet's
  /// growing joins are then all one buffer, written once): such Concats copy nothing.
  std::vector<ValueId> storage_of;
  /// Per ValueId: where it starts in its storage value's memory, in bytes (a multiple of 64).
  std::vector<size_t> offset_of;
  /// Bytes of the planned values if each had a buffer of its own (views excluded).
  size_t unshared_bytes = 0;

  size_t total_bytes() const;
};

/// Plans the intermediate values of a validated model with static shapes. A node's outputs never
/// share memory with its own inputs (kernels do not work in place), except a view's output, which
/// is its input's memory, and disjoint parts of one Concat's output: a buffer then lives from the
/// first write of any part to the last reader of any. `stored_types`, when given, has per ValueId
/// the type each value is stored in (bf16 between bf16 kernels, else its own); without it, each
/// value's own type. `layouts`, when given, has per ValueId its element order: a Concat's input is
/// hosted in its output only where both have the same one and the slice is one run (everything
/// before the axis of size 1; channel-blocked: joined along whole channel blocks).
MemoryPlan plan_memory(const Model& model, const std::vector<ElementType>& stored_types = {},
                       const std::vector<kernels::TensorLayout>& layouts = {});

}  // namespace troupe::detail
