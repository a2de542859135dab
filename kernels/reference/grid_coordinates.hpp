#pragma once

// GridSample's coordinate arithmetic (PyTorch's grid_sample, which ONNX's definition and test data
// come from): shared by the reference kernel (kernels/reference/sampling.cpp), the specification,
// and the fast one (kernels/dnnl/grid_sample.cpp), so both place every sample alike.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace troupe::kernels::reference {

// A normalized coordinate in [-1, 1] as a pixel coordinate: -1 and 1 are the centres of the edge
// pixels with align_corners, else the outer edges of the edge pixels.
inline double unnormalize(double coord, int64_t size, bool align_corners) {
  const auto s = static_cast<double>(size);
  return align_corners ? (coord + 1) / 2 * (s - 1) : ((coord + 1) * s - 1) / 2;
}

// Reflects a coordinate into [twice_low / 2, twice_high / 2] (PyTorch's reflect_coordinates).
inline double reflect(double coord, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0;
  const double low = static_cast<double>(twice_low) / 2;
  const double span = static_cast<double>(twice_high - twice_low) / 2;
  coord = std::abs(coord - low);
  const double extra = std::fmod(coord, span);
  const auto flips = static_cast<int64_t>(std::floor(coord / span));
  return flips % 2 == 0 ? extra + low : span - extra + low;
}

enum class GridPadding { zeros, border, reflection };

/// The padding_mode attribute's value as a GridPadding (zeros for anything else).
inline GridPadding grid_padding(const std::string& name) {
  return name == "border"       ? GridPadding::border
         : name == "reflection" ? GridPadding::reflection
                                : GridPadding::zeros;
}

// Applies the padding mode to a pixel coordinate: border clamps it into the map; reflection
// mirrors it at the edge pixels' centres (align_corners) or outer edges, then clamps; zeros
// leaves it (reads outside give 0).
inline double pad_coordinate(double coord, int64_t size, GridPadding padding, bool align_corners) {
  const double last = static_cast<double>(size - 1);
  if (padding == GridPadding::border) return std::clamp(coord, 0.0, last);
  if (padding == GridPadding::reflection) {
    coord = align_corners ? reflect(coord, 0, 2 * (size - 1)) : reflect(coord, -1, 2 * size - 1);
    return std::clamp(coord, 0.0, last);
  }
  return coord;
}

}  // namespace troupe::kernels::reference
