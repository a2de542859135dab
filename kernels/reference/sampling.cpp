// Reference kernels of RoiAlign and GridSample (ONNX opset 16), which read a feature map
// [N, C, H, W] at fractional coordinates. Both compute in double.
//
// RoiAlign follows the definition ONNX shares with Caffe2/onnxruntime (ONNX's text gives no
// formula): each output cell of an roi averages (or maxes) a sampling_ratio x sampling_ratio grid
// of bilinear samples. GridSample is PyTorch's grid_sample, which ONNX's definition and test data
// come from.

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/reference/common.hpp"
#include "kernels/reference/element_types.hpp"
#include "kernels/reference/grid_coordinates.hpp"
#include "kernels/reference/reference.hpp"
#include "kernels/reference/roi_geometry.hpp"

namespace troupe::kernels::reference {

namespace {

using Tensors = std::vector<Tensor>;

// RoiAlign: roi r = (x1, y1, x2, y2) scaled by spatial_scale (shifted by -0.5 under half_pixel)
// is cut into output_height x output_width bins; each bin samples a grid of
// sampling_ratio (or ceil(bin size)) points per side at the grid cells' centres. "avg" averages
// the bilinear samples; "max", as in onnxruntime, takes the largest weighted neighbour of any
// sample.
void roi_align(const Node& node, const Tensors& in, Tensors& out) {
  const std::vector<int64_t>& dims = in[0].shape().dims();
  if (dims.size() != 4) fail(node, "X must be [N, C, H, W], got " + in[0].shape().to_string());
  const int64_t batch = dims[0];
  const int64_t channels = dims[1];
  const int64_t height = dims[2];
  const int64_t width = dims[3];
  const std::vector<double> x = floating_values(node, in[0]);
  const std::vector<double> rois = floating_values(node, in[1]);
  const std::vector<int64_t> batch_indices = read_ints(node, in[2], "batch_indices");
  const auto num_rois = static_cast<int64_t>(batch_indices.size());
  if (in[1].shape().rank() != 2 || in[1].shape()[1] != 4 || in[1].shape()[0] != num_rois)
    fail(node, "rois " + in[1].shape().to_string() + " must be [" + std::to_string(num_rois) +
                   ", 4], one box per batch index");
  const RoiAlignSettings settings(node);
  const int64_t out_h = settings.out_h, out_w = settings.out_w;
  const bool max_mode = settings.max_mode;
  if (out_h < 1 || out_w < 1)
    fail(node, "output_height and output_width must be positive, got " + std::to_string(out_h) +
                   " and " + std::to_string(out_w));

  std::vector<double> y(static_cast<size_t>(num_rois * channels * out_h * out_w));
  for (int64_t r = 0; r < num_rois; ++r) {
    const int64_t b = batch_indices[static_cast<size_t>(r)];
    if (b < 0 || b >= batch)
      fail(node, "batch index " + std::to_string(b) + " of roi " + std::to_string(r) +
                     " is outside [0, " + std::to_string(batch) + ")");
    const RoiBins bins(settings, &rois[static_cast<size_t>(r * 4)]);
    for (int64_t c = 0; c < channels; ++c) {
      const double* plane = &x[static_cast<size_t>((b * channels + c) * height * width)];
      for (int64_t ph = 0; ph < out_h; ++ph)
        for (int64_t pw = 0; pw < out_w; ++pw) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < bins.grid_h; ++iy)
            for (int64_t ix = 0; ix < bins.grid_w; ++ix) {
              const RoiSample s = bins.sample(ph, pw, iy, ix, height, width);
              if (max_mode) {
                for (size_t k = 0; k < 4; ++k) {
                  const double v = s.weight[k] * plane[s.offset[k]];
                  acc = first ? v : std::max(acc, v);
                  first = false;
                }
              } else {
                for (size_t k = 0; k < 4; ++k) acc += s.weight[k] * plane[s.offset[k]];
              }
            }
          y[static_cast<size_t>(((r * channels + c) * out_h + ph) * out_w + pw)] =
              max_mode ? acc : acc / bins.count;
        }
    }
  }
  store_values(node, y, out[0]);
}

// --- GridSample (PyTorch's grid_sample on 4-D input) -----------------------------------------

// The cubic convolution weights of the four taps around t in [0, 1) (A = -0.75, as PyTorch).
std::array<double, 4> cubic_weights(double t) {
  constexpr double a = -0.75;
  auto near = [](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
  auto far = [](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

void grid_sample(const Node& node, const Tensors& in, Tensors& out) {
  const std::vector<int64_t>& dims = in[0].shape().dims();
  const std::vector<int64_t>& grid_dims = in[1].shape().dims();
  if (dims.size() != 4 || grid_dims.size() != 4 || grid_dims[3] != 2 || grid_dims[0] != dims[0])
    fail(node, "X " + in[0].shape().to_string() + " and grid " + in[1].shape().to_string() +
                   " must be [N, C, H, W] and [N, H_out, W_out, 2]");
  const int64_t batch = dims[0];
  const int64_t channels = dims[1];
  const int64_t height = dims[2];
  const int64_t width = dims[3];
  const int64_t out_h = grid_dims[1];
  const int64_t out_w = grid_dims[2];
  const std::string mode = node.attributes.get_string_or("mode", "bilinear");
  const std::string padding_name = node.attributes.get_string_or("padding_mode", "zeros");
  const GridPadding padding = grid_padding(padding_name);
  const bool align_corners = node.attributes.get_int_or("align_corners", 0) != 0;
  const std::vector<double> x = floating_values(node, in[0]);
  const std::vector<double> grid = floating_values(node, in[1]);

  std::vector<double> y(static_cast<size_t>(batch * channels * out_h * out_w));
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t oh = 0; oh < out_h; ++oh)
      for (int64_t ow = 0; ow < out_w; ++ow) {
        const size_t g = static_cast<size_t>(((n * out_h + oh) * out_w + ow) * 2);
        const double gx = unnormalize(grid[g], width, align_corners);
        const double gy = unnormalize(grid[g + 1], height, align_corners);
        for (int64_t c = 0; c < channels; ++c) {
          const double* plane = &x[static_cast<size_t>((n * channels + c) * height * width)];
          // The pixel at integral coordinates, 0 outside the plane (compared as doubles, so a
          // huge or NaN coordinate is outside too).
          auto pixel = [&](double row, double col) {
            if (!(row >= 0 && row < static_cast<double>(height) && col >= 0 &&
                  col < static_cast<double>(width)))
              return 0.0;
            return plane[static_cast<int64_t>(row) * width + static_cast<int64_t>(col)];
          };
          double v = 0;
          if (mode == "bicubic") {
            // The taps are padded one by one (PyTorch's get_value_bounded), the point itself not.
            const double fx = std::floor(gx);
            const double fy = std::floor(gy);
            const std::array<double, 4> wx = cubic_weights(gx - fx);
            const std::array<double, 4> wy = cubic_weights(gy - fy);
            for (int64_t i = 0; i < 4; ++i)
              for (int64_t j = 0; j < 4; ++j) {
                const double row =
                    pad_coordinate(fy - 1 + static_cast<double>(i), height, padding, align_corners);
                const double col =
                    pad_coordinate(fx - 1 + static_cast<double>(j), width, padding, align_corners);
                v += wy[static_cast<size_t>(i)] * wx[static_cast<size_t>(j)] * pixel(row, col);
              }
          } else {
            const double px = pad_coordinate(gx, width, padding, align_corners);
            const double py = pad_coordinate(gy, height, padding, align_corners);
            if (mode == "nearest") {
              // Halves round to even, as std::nearbyint in the default rounding mode.
              v = pixel(std::nearbyint(py), std::nearbyint(px));
            } else {
              const double x0 = std::floor(px);
              const double y0 = std::floor(py);
              const double lx = px - x0;
              const double ly = py - y0;
              // Only taps inside the map add (as PyTorch): a NaN coordinate, whose weights are
              // NaN and taps all outside, samples 0.
              auto add = [&](double row, double col, double weight) {
                if (row >= 0 && row < static_cast<double>(height) && col >= 0 &&
                    col < static_cast<double>(width))
                  v += weight * pixel(row, col);
              };
              add(y0, x0, (1 - ly) * (1 - lx));
              add(y0, x0 + 1, (1 - ly) * lx);
              add(y0 + 1, x0, ly * (1 - lx));
              add(y0 + 1, x0 + 1, ly * lx);
            }
          }
          y[static_cast<size_t>(((n * channels + c) * out_h + oh) * out_w + ow)] = v;
        }
      }
  store_values(node, y, out[0]);
}

}  // namespace

void register_sampling(KernelRegistry& registry) {
  const std::pair<const char*, ReferenceFn> kernels[] = {{"RoiAlign", &roi_align},
                                                         {"GridSample", &grid_sample}};
  for (const auto& [op_type, fn] : kernels)
    registry.add("reference", 0, op_type,
                 [fn = fn](const KernelRequest& r) { return make_reference_kernel(r.node, fn); });
}

}  // namespace troupe::kernels::reference
