#pragma once

// The ops whose output size their data decides: NonZero, Compress, Unique, NonMaxSuppression.
// Shape inference can size their outputs only with the data at hand (a constant input, or every
// input during a run, see StreamExecutor), so the selection itself lives here, at the IR layer,
// and the reference kernels write what it selects.

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

namespace troupe::selection {

/// A tensor seen as [outer, count, inner] around `axis` (count = every element when absent):
/// slice k along the axis is elements (o * count + k) * inner + i.
struct SliceGeometry {
  int64_t outer = 1;
  int64_t count = 1;
  int64_t inner = 1;
};
SliceGeometry slices_of(const Shape& shape, std::optional<int64_t> axis);

/// Row-major flat indices of x's non-zero elements.
std::vector<int64_t> nonzero(const Tensor& x);

/// The indices along an axis of length `length` that Compress keeps: those where `condition`
/// (1-D) is true; a condition shorter than the axis drops the rest. Throws naming the node when
/// it is longer.
std::vector<int64_t> compress(const Node& node, const Tensor& condition, int64_t length);

/// Unique along `axis` (every element when absent): the slices in output order (sorted
/// ascending, or by first occurrence), each one's first index, every slice's position in the
/// output, and the counts.
struct UniqueSlices {
  std::vector<int64_t> first;    // per unique slice: its first index along the axis
  std::vector<int64_t> inverse;  // per input slice: the index of its unique slice
  std::vector<int64_t> counts;   // per unique slice
};
UniqueSlices unique(const Node& node, const Tensor& x, std::optional<int64_t> axis, bool sorted);

/// NonMaxSuppression's selected (batch, class, box) triples, batch by batch, class by class, each
/// class's boxes in the order they were selected. Inputs as ONNX defines them: boxes [B, N, 4],
/// scores [B, C, N], then the optional max_output_boxes_per_class, iou_threshold and
/// score_threshold scalars (empty tensors when omitted).
std::vector<std::array<int64_t, 3>> non_max_suppression(const Node& node,
                                                        const std::vector<Tensor>& inputs);

}  // namespace troupe::selection
