#pragma once

// RoiAlign's geometry (the definition ONNX shares with Caffe2/onnxruntime): where each output
// bin of a box samples the feature map and with which bilinear weights. Shared by the reference
// kernel (kernels/reference/sampling.cpp), the specification, and the fast one
// (kernels/dnnl/roi_align.cpp), so both read the same pixels with the same weights.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "troupe/model.hpp"

namespace troupe::kernels::reference {

/// One bilinear sample: the four neighbours' offsets in a plane and their weights. A sample more
/// than one pixel outside the map has all weights 0 (and offsets 0).
struct RoiSample {
  std::array<int64_t, 4> offset{};
  std::array<double, 4> weight{};
};

inline RoiSample roi_sample(double y, double x, int64_t height, int64_t width) {
  RoiSample s;
  if (!(y >= -1.0 && y <= static_cast<double>(height) && x >= -1.0 &&
        x <= static_cast<double>(width)))
    return s;  // outside, or not a number
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  auto y_low = static_cast<int64_t>(y);
  auto x_low = static_cast<int64_t>(x);
  int64_t y_high = y_low + 1;
  int64_t x_high = x_low + 1;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<double>(y_low);
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<double>(x_low);
  }
  const double ly = y - static_cast<double>(y_low);
  const double lx = x - static_cast<double>(x_low);
  const double hy = 1 - ly;
  const double hx = 1 - lx;
  s.offset = {y_low * width + x_low, y_low * width + x_high, y_high * width + x_low,
              y_high * width + x_high};
  s.weight = {hy * hx, hy * lx, ly * hx, ly * lx};
  return s;
}

/// RoiAlign's attributes.
struct RoiAlignSettings {
  int64_t out_h = 1, out_w = 1;
  int64_t sampling_ratio = 0;
  double scale = 1.0;
  bool max_mode = false;
  bool half_pixel = true;

  explicit RoiAlignSettings(const Node& node)
      : out_h(node.attributes.get_int_or("output_height", 1)),
        out_w(node.attributes.get_int_or("output_width", 1)),
        sampling_ratio(node.attributes.get_int_or("sampling_ratio", 0)),
        scale(node.attributes.get_float_or("spatial_scale", 1.0)),
        max_mode(node.attributes.get_string_or("mode", "avg") == "max"),
        half_pixel(node.attributes.get_string_or("coordinate_transformation_mode", "half_pixel") ==
                   "half_pixel") {}
};

/// One box's bins: box (x1, y1, x2, y2) scaled by spatial_scale (shifted by -0.5 under
/// half_pixel) cut into out_h x out_w bins of grid_h x grid_w samples at the grid cells' centres.
struct RoiBins {
  double x1 = 0, y1 = 0, bin_h = 0, bin_w = 0;
  int64_t grid_h = 0, grid_w = 0;
  double count = 1;  // samples averaged per bin (at least 1)

  RoiBins(const RoiAlignSettings& s, const double box[4]) {
    const double shift = s.half_pixel ? 0.5 : 0.0;
    x1 = box[0] * s.scale - shift;
    y1 = box[1] * s.scale - shift;
    double roi_w = box[2] * s.scale - shift - x1;
    double roi_h = box[3] * s.scale - shift - y1;
    // Without half_pixel (the legacy mode), a roi is at least one pixel wide and high.
    if (!s.half_pixel) {
      roi_w = std::max(roi_w, 1.0);
      roi_h = std::max(roi_h, 1.0);
    }
    bin_h = roi_h / static_cast<double>(s.out_h);
    bin_w = roi_w / static_cast<double>(s.out_w);
    grid_h = s.sampling_ratio > 0 ? s.sampling_ratio : adaptive_grid(bin_h);
    grid_w = s.sampling_ratio > 0 ? s.sampling_ratio : adaptive_grid(bin_w);
    count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
  }

  /// Samples per side of a bin when sampling_ratio is 0: ceil(bin size); none for an empty or
  /// inverted box or one that is not a number, and at most 1024 (a box of absurd size would
  /// otherwise take hours to sample; below that the definition is followed exactly).
  static int64_t adaptive_grid(double bin) {
    if (!(bin > 0)) return 0;
    return static_cast<int64_t>(std::ceil(std::min(bin, 1024.0)));
  }

  /// Sample (iy, ix) of bin (ph, pw).
  RoiSample sample(int64_t ph, int64_t pw, int64_t iy, int64_t ix, int64_t height,
                   int64_t width) const {
    const double sy = y1 + static_cast<double>(ph) * bin_h +
                      (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h);
    const double sx = x1 + static_cast<double>(pw) * bin_w +
                      (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w);
    return roi_sample(sy, sx, height, width);
  }
};

}  // namespace troupe::kernels::reference
