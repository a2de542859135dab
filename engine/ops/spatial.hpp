#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "troupe/model.hpp"

// Window arithmetic shared by the schemas and the kernels of Conv, ConvTranspose and the pooling
// ops, so that shape inference and execution always agree on output sizes and padding.
namespace troupe::spatial {

enum class AutoPad { notset, same_upper, same_lower, valid };

/// Throws ModelError "<op_type> node '<name>': <message>", the same text ShapeInferContext::fail
/// produces, so kernels and schemas report a bad node alike.
[[noreturn]] void fail(const Node& node, const std::string& message);

/// Throws UnsupportedOperation (a ModelError) with the same text: for valid ONNX that troupe does
/// not implement, so callers can tell "not supported" from "malformed".
[[noreturn]] void unsupported(const Node& node, const std::string& message);

/// "[1,2,3]".
std::string to_string(const std::vector<int64_t>& values);

/// The dims of `shape` after N and C.
std::vector<int64_t> spatial_dims(const Shape& shape);

/// Reads attribute auto_pad ("" counts as NOTSET).
AutoPad read_auto_pad(const Node& node);

/// Extent of a kernel of size `k` with dilation `d`.
inline int64_t dilated_extent(int64_t k, int64_t d) {
  return (k - 1) * d + 1;
}

/// Sliding-window attributes of one node, one entry per spatial dim.
struct Window {
  std::vector<int64_t> kernel;  // Shape::dynamic when the weights' dims are not known
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads_begin;  // as given by attribute pads (used when auto_pad is NOTSET)
  std::vector<int64_t> pads_end;
  AutoPad auto_pad = AutoPad::notset;
  bool ceil_mode = false;
};

/// Reads and checks kernel_shape, strides, dilations, pads, auto_pad and ceil_mode for
/// `spatial_rank` spatial dims. `weights_kernel` are the kernel dims taken from the weights (Conv);
/// when empty, attribute kernel_shape is required (pooling). Throws ModelError naming the node.
Window read_window(const Node& node, size_t spatial_rank,
                   const std::vector<int64_t>& weights_kernel = {});

/// Output size and the padding actually applied, per spatial dim.
struct Geometry {
  std::vector<int64_t> input;
  std::vector<int64_t> output;      // Shape::dynamic where it depends on an unknown dim
  std::vector<int64_t> pads_begin;  // resolved padding (auto_pad applied); 0 where unknown
  std::vector<int64_t> pads_end;
};

/// Geometry of a sliding window over `input` (Conv, MaxPool, AveragePool):
///   NOTSET: out = floor((in + pad_begin + pad_end - extent) / stride) + 1; with ceil_mode the
///           division rounds up, but a last window that would start in the end padding is dropped.
///   VALID:  the same with zero padding.
///   SAME_*: out = ceil(in / stride); the total padding max(0, (out-1)*stride + extent - in) is
///   split
///           evenly, the odd element going to the end (SAME_UPPER) or the beginning (SAME_LOWER).
/// Throws ModelError naming the node when the window does not fit.
Geometry forward_geometry(const Node& node, const Window& window,
                          const std::vector<int64_t>& input);

/// Geometry of ConvTranspose over `input`, reading attributes output_padding and output_shape:
///   out = stride*(in-1) + output_padding + extent - pad_begin - pad_end.
/// When output_shape is given (or auto_pad is SAME_*, meaning out = in*stride) the total padding
/// stride*(in-1) + output_padding + extent - out is derived, the odd element going to the end for
/// SAME_UPPER and to the beginning otherwise. Resolved pads may then be negative (the output gets
/// positions no input reaches).
Geometry transposed_geometry(const Node& node, const Window& window,
                             const std::vector<int64_t>& input);

}  // namespace troupe::spatial
