#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/ops/spatial.hpp"
#include "troupe/error.hpp"
#include "troupe/model.hpp"

namespace troupe::kernels::reference {

// The reference Conv/ConvTranspose/pooling kernels run every spatial rank (1 to 3) through one
// 3-D loop nest: the missing leading dims get size 1, kernel 1, stride 1, dilation 1, no padding.
struct Window3d {
  std::array<int64_t, 3> in{1, 1, 1};
  std::array<int64_t, 3> out{1, 1, 1};
  std::array<int64_t, 3> kernel{1, 1, 1};
  std::array<int64_t, 3> stride{1, 1, 1};
  std::array<int64_t, 3> dilation{1, 1, 1};
  std::array<int64_t, 3> pad_begin{0, 0, 0};
  std::array<int64_t, 3> pad_end{0, 0, 0};

  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }

  /// Input coordinate on `axis` read by output position `o` through kernel tap `k` (a forward
  /// window); for ConvTranspose the same relation maps input position `o` to an output position.
  int64_t source(int axis, int64_t o, int64_t k) const {
    return o * stride[axis] - pad_begin[axis] + k * dilation[axis];
  }
  bool inside(int axis, int64_t i) const { return i >= 0 && i < in[axis]; }
  /// Calls visit(id, ih, iw, tap) for each kernel tap of output position (od, oh, ow) whose
  /// input position (id, ih, iw) lies inside the input (not in its padding); `tap` is the
  /// kernel element's index, kd * kernel[1] * kernel[2] + kh * kernel[2] + kw.
  template <class Visit>
  void for_each_tap(int64_t od, int64_t oh, int64_t ow, Visit&& visit) const {
    for (int64_t kd = 0; kd < kernel[0]; ++kd) {
      const int64_t id = source(0, od, kd);
      if (!inside(0, id)) continue;
      for (int64_t kh = 0; kh < kernel[1]; ++kh) {
        const int64_t ih = source(1, oh, kh);
        if (!inside(1, ih)) continue;
        for (int64_t kw = 0; kw < kernel[2]; ++kw) {
          const int64_t iw = source(2, ow, kw);
          if (inside(2, iw)) visit(id, ih, iw, (kd * kernel[1] + kh) * kernel[2] + kw);
        }
      }
    }
  }
  /// The taps [lo, hi) of `axis` whose input position for output position `o` lies inside the
  /// input (the range for_each_tap visits, for loops that want it whole).
  void taps_inside(int axis, int64_t o, int64_t& lo, int64_t& hi) const {
    const int64_t first = o * stride[axis] - pad_begin[axis];
    const int64_t d = dilation[axis];
    lo = first >= 0 ? 0 : (-first + d - 1) / d;
    hi = first >= in[axis] ? 0 : std::min(kernel[axis], (in[axis] - 1 - first) / d + 1);
    if (hi < lo) hi = lo;
  }
  /// taps_inside for every output position of `axis`: lo and hi of position o at 2o and 2o + 1
  /// (for loops that would otherwise divide per output).
  std::vector<int64_t> tap_ranges(int axis) const {
    std::vector<int64_t> ranges(static_cast<size_t>(2 * out[axis]));
    for (int64_t o = 0; o < out[axis]; ++o) taps_inside(axis, o, ranges[2 * o], ranges[2 * o + 1]);
    return ranges;
  }
  /// Offset of input position (id, ih, iw) within one plane.
  int64_t in_offset(int64_t id, int64_t ih, int64_t iw) const {
    return (id * in[1] + ih) * in[2] + iw;
  }
  /// Whether `i` lies in the input or its explicit padding (AveragePool's count_include_pad).
  bool inside_padded(int axis, int64_t i) const {
    return i >= -pad_begin[axis] && i < in[axis] + pad_end[axis];
  }
};

inline Window3d to_window3d(const spatial::Window& window, const spatial::Geometry& geometry) {
  Window3d w;
  const size_t rank = geometry.input.size();
  for (size_t i = 0; i < rank; ++i) {
    const size_t j = 3 - rank + i;
    w.in[j] = geometry.input[i];
    w.out[j] = geometry.output[i];
    w.kernel[j] = window.kernel[i];
    w.stride[j] = window.strides[i];
    w.dilation[j] = window.dilations[i];
    w.pad_begin[j] = geometry.pads_begin[i];
    w.pad_end[j] = geometry.pads_end[i];
  }
  return w;
}

[[noreturn]] inline void execution_failure(const Node& node, const std::string& message) {
  throw ExecutionError(node.op_type + " node '" + node.name + "': " + message);
}

/// Checks that the executor allocated `output` with the shape the kernel computes.
inline void check_output_shape(const Node& node, const Tensor& output,
                               const std::vector<int64_t>& expected) {
  if (output.shape().dims() != expected)
    execution_failure(node, "output tensor has shape " + output.shape().to_string() +
                                ", expected " + Shape(expected).to_string());
}

inline bool is_f32_or_f64(ElementType type) {
  return type == ElementType::f32 || type == ElementType::f64;
}

/// Calls fn(T{}) with T = float or double after the element type of the data (the reference
/// kernels of window3d.hpp run f32 and f64 only; element_types.hpp's dispatch_floating also
/// takes f16 and bf16).
template <class Fn>
void dispatch_float_or_double(const Node& node, ElementType type, Fn&& fn) {
  switch (type) {
    case ElementType::f32:
      fn(float{});
      return;
    case ElementType::f64:
      fn(double{});
      return;
    default:
      execution_failure(
          node, "the reference kernel supports f32 and f64, not " + std::string(to_string(type)));
  }
}

}  // namespace troupe::kernels::reference
