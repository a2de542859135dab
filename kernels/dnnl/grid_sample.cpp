// GridSample in f32, bilinear or nearest, every padding mode: the reference computes in double
// and converts the whole feature map to doubles on every run, which made it RAFT's slowest op
// (48 calls, 674 ms per request, on [2852, 1, 46, 62] maps sampled 7x7 times each). Here each
// output point's coordinates are computed once (in double, with the reference's own arithmetic,
// kernels/reference/grid_coordinates.hpp, so a sample lands on the same pixels), then its taps
// and weights serve every channel; points are spread over the stream's threads. Bicubic stays
// with the reference.
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/team.hpp"
#include "kernels/reference/grid_coordinates.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

using reference::GridPadding;

class GridSampleKernel final : public Kernel {
 public:
  explicit GridSampleKernel(const KernelRequest& r)
      : node_(r.node),
        nearest_(r.node.attributes.get_string_or("mode", "bilinear") == "nearest"),
        padding_(reference::grid_padding(r.node.attributes.get_string_or("padding_mode", "zeros"))),
        align_corners_(r.node.attributes.get_int_or("align_corners", 0) != 0) {
    const std::string mode = r.node.attributes.get_string_or("mode", "bilinear");
    if (mode != "bilinear" && mode != "nearest") throw Unsupported{};
    if (r.inputs.size() != 2 || !all_f32(r)) throw Unsupported{};
    if (r.inputs[0].shape.rank() != 4 || r.inputs[1].shape.rank() != 4) throw Unsupported{};
  }

  std::string implementation() const override { return "dnnl:grid_sample"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const std::vector<int64_t>& dims = in[0].shape().dims();
    const std::vector<int64_t>& grid_dims = in[1].shape().dims();
    if (grid_dims[3] != 2 || grid_dims[0] != dims[0])
      throw ExecutionError("GridSample node '" + node_.name + "': X " + in[0].shape().to_string() +
                           " and grid " + in[1].shape().to_string() +
                           " must be [N, C, H, W] and [N, H_out, W_out, 2]");
    const int64_t batch = dims[0], channels = dims[1], height = dims[2], width = dims[3];
    const int64_t out_h = grid_dims[1], out_w = grid_dims[2];
    const int64_t plane = height * width, out_plane = out_h * out_w;
    const float* x = in[0].data<float>();
    const float* grid = in[1].data<float>();
    float* y = out[0].data<float>();
    const int64_t rows = batch * out_h;
    const int64_t work = rows * out_w * channels;
    for_each_index_if(work > (int64_t{1} << 15) && rows > 1, rows, [&](int64_t row) {
      const int64_t n = row / out_h, oh = row % out_h;
      const float* maps = x + n * channels * plane;
      for (int64_t ow = 0; ow < out_w; ++ow) {
        const float* g = grid + (row * out_w + ow) * 2;
        const double px = reference::pad_coordinate(
            reference::unnormalize(g[0], width, align_corners_), width, padding_, align_corners_);
        const double py = reference::pad_coordinate(
            reference::unnormalize(g[1], height, align_corners_), height, padding_, align_corners_);
        float* dst = y + (n * channels * out_h + oh) * out_w + ow;
        // Up to four taps inside the map: their offsets in a plane and weights (compared as
        // doubles, so that a huge or NaN coordinate is outside; a tap outside reads 0).
        int64_t offset[4];
        float weight[4];
        int taps = 0;
        auto tap = [&](double r, double c, double w) {
          if (!(r >= 0 && r < static_cast<double>(height) && c >= 0 &&
                c < static_cast<double>(width)))
            return;
          offset[taps] = static_cast<int64_t>(r) * width + static_cast<int64_t>(c);
          weight[taps++] = static_cast<float>(w);
        };
        if (nearest_) {
          // Halves round to even, as std::nearbyint in the default rounding mode.
          tap(std::nearbyint(py), std::nearbyint(px), 1.0);
        } else {
          const double x0 = std::floor(px), y0 = std::floor(py);
          const double lx = px - x0, ly = py - y0;
          tap(y0, x0, (1 - ly) * (1 - lx));
          tap(y0, x0 + 1, (1 - ly) * lx);
          tap(y0 + 1, x0, ly * (1 - lx));
          tap(y0 + 1, x0 + 1, ly * lx);
        }
        for (int64_t c = 0; c < channels; ++c) {
          const float* m = maps + c * plane;
          float v = 0;
          for (int k = 0; k < taps; ++k) v += weight[k] * m[offset[k]];
          dst[c * out_plane] = v;
        }
      }
    });
  }

 private:
  Node node_;
  bool nearest_;
  GridPadding padding_;
  bool align_corners_;
};

}  // namespace

void register_grid_sample(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "GridSample", construct_kernel<GridSampleKernel>);
}

}  // namespace troupe::kernels::onednn
