#pragma once

#include <vector>

#include "troupe/model.hpp"

// Attributes of Resize (opset 11-13 layout: X, roi, scales, sizes), read the same way by the
// schema and the kernels.
namespace troupe::resize {

enum class Mode { nearest, linear, cubic };
enum class CoordinateMode {
  half_pixel,
  pytorch_half_pixel,
  align_corners,
  asymmetric,
  tf_half_pixel_for_nn,
  tf_crop_and_resize
};
enum class NearestMode { round_prefer_floor, round_prefer_ceil, floor, ceil };

struct Attributes {
  Mode mode = Mode::nearest;
  CoordinateMode coordinate_mode = CoordinateMode::half_pixel;
  NearestMode nearest_mode = NearestMode::round_prefer_floor;
  double extrapolation_value = 0.0;  // tf_crop_and_resize only
  double cubic_coeff_a = -0.75;      // cubic only
  bool exclude_outside = false;  // cubic only: taps outside X get weight 0, the rest renormalized
};

/// Reads mode, coordinate_transformation_mode, nearest_mode, extrapolation_value, cubic_coeff_a and
/// exclude_outside; throws ModelError naming the node for unknown values.
Attributes read_attributes(const Node& node);

/// Output dims for scales: floor(input * scale) per axis (dynamic input dims stay dynamic).
std::vector<int64_t> scaled_dims(const std::vector<int64_t>& input,
                                 const std::vector<double>& scales);

}  // namespace troupe::resize
