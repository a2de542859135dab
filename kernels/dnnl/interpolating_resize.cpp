// Linear and cubic Resize with any coordinate transform (align_corners, asymmetric, half_pixel,
// pytorch_half_pixel, tf_half_pixel_for_nn; what oneDNN's resampling does not compute as ONNX
// does) as two separable passes over each plane of the last two axes: each output row is the
// weighted sum of its (up to four) input rows, then each output element the weighted sum of its
// taps along that row. The taps and weights are the reference kernel's
// (reference::resize_samples), the sums run in f32 over whole rows, and the planes' rows are
// shared among the stream's threads. The axes before the last two must be copied as they are
// (N and C of an image); the reference runs anything else, and tf_crop_and_resize's
// extrapolation. (A bilinear align_corners upsampling of [1,64,128,128] took 21 ms in the
// reference kernel, which walks every output element through every axis in double.)
#include <omp.h>

#include <vector>

#include "engine/ops/resize.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/interpolating_resize.hpp"
#include "kernels/dnnl/team.hpp"
#include "kernels/reference/resize.hpp"

namespace troupe::kernels::onednn {

namespace {

using reference::ResizeSample;

// Whether every output index of this axis copies the same input index (an axis not resized).
bool is_identity(const std::vector<ResizeSample>& axis) {
  for (size_t o = 0; o < axis.size(); ++o) {
    const ResizeSample& s = axis[o];
    if (s.outside) return false;
    for (int k = 0; k < s.taps; ++k) {
      const bool self = s.index[static_cast<size_t>(k)] == static_cast<int64_t>(o);
      const double w = s.weight[static_cast<size_t>(k)];
      if (w != 0.0 && !(self && w == 1.0)) return false;
    }
  }
  return true;
}

// The taps of one axis with their weights in f32, zero weights dropped.
struct Taps {
  std::vector<int64_t> begin;  // per output index, where its taps start in index/weight
  std::vector<int64_t> index;
  std::vector<float> weight;
};

Taps taps_of(const std::vector<ResizeSample>& axis) {
  Taps t;
  for (const ResizeSample& s : axis) {
    t.begin.push_back(static_cast<int64_t>(t.index.size()));
    for (int k = 0; k < s.taps; ++k) {
      if (s.weight[static_cast<size_t>(k)] == 0.0) continue;
      t.index.push_back(s.index[static_cast<size_t>(k)]);
      t.weight.push_back(static_cast<float>(s.weight[static_cast<size_t>(k)]));
    }
  }
  t.begin.push_back(static_cast<int64_t>(t.index.size()));
  return t;
}

class InterpolatingResizeKernel final : public Kernel {
 public:
  explicit InterpolatingResizeKernel(const KernelRequest& request) : node_(request.node) {}
  std::string implementation() const override { return "dnnl:separable_rows"; }

  void execute(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    const Tensor x = inputs.at(0).contiguous();
    Tensor& y = outputs.at(0);
    const std::vector<int64_t>& in_dims = x.shape().dims();
    const std::vector<int64_t>& out_dims = y.shape().dims();
    const size_t rank = in_dims.size();
    const std::vector<std::vector<ResizeSample>> samples =
        reference::resize_samples(node_, inputs, out_dims);
    bool separable = rank >= 2 && samples.size() == rank;
    for (size_t a = 0; separable && a + 2 < rank; ++a)
      separable = in_dims[a] == out_dims[a] && is_identity(samples[a]);
    for (size_t a = rank - 2; separable && a < rank; ++a)
      for (const ResizeSample& s : samples[a]) separable = separable && !s.outside;
    if (!separable) {
      reference::resize(node_, inputs, outputs);
      return;
    }
    if (y.size() == 0) return;
    const Taps rows = taps_of(samples[rank - 2]);
    const Taps columns = taps_of(samples[rank - 1]);
    const int64_t in_rows = in_dims[rank - 2], in_columns = in_dims[rank - 1];
    const int64_t out_rows = out_dims[rank - 2], out_columns = out_dims[rank - 1];
    int64_t planes = 1;
    for (size_t a = 0; a + 2 < rank; ++a) planes *= in_dims[a];
    const float* src = x.data<float>();
    float* dst = y.data<float>();
    const int64_t work = planes * out_rows;
    run_team_if(y.size() > (int64_t{1} << 16) && work > 1, [&] {
      std::vector<float> row(static_cast<size_t>(in_columns));
#pragma omp for schedule(static)
      for (int64_t w = 0; w < work; ++w) {
        const int64_t plane = w / out_rows, r = w % out_rows;
        const float* in_plane = src + plane * in_rows * in_columns;
        // The output row's input row: a weighted sum of its taps (one tap of weight 1 read as is).
        const int64_t first = rows.begin[static_cast<size_t>(r)];
        const int64_t last = rows.begin[static_cast<size_t>(r) + 1];
        const float* line = row.data();
        if (last - first == 1 && rows.weight[static_cast<size_t>(first)] == 1.f) {
          line = in_plane + rows.index[static_cast<size_t>(first)] * in_columns;
        } else {
          std::fill(row.begin(), row.end(), 0.f);
          for (int64_t t = first; t < last; ++t) {
            const float* in_row = in_plane + rows.index[static_cast<size_t>(t)] * in_columns;
            const float weight = rows.weight[static_cast<size_t>(t)];
            for (int64_t c = 0; c < in_columns; ++c)
              row[static_cast<size_t>(c)] += weight * in_row[c];
          }
        }
        float* out = dst + (plane * out_rows + r) * out_columns;
        for (int64_t c = 0; c < out_columns; ++c) {
          float sum = 0.f;
          for (int64_t t = columns.begin[static_cast<size_t>(c)];
               t < columns.begin[static_cast<size_t>(c) + 1]; ++t)
            sum += columns.weight[static_cast<size_t>(t)] *
                   line[columns.index[static_cast<size_t>(t)]];
          out[c] = sum;
        }
      }
    });
  }

 private:
  Node node_;
};

}  // namespace

std::unique_ptr<Kernel> make_interpolating_resize(const KernelRequest& request) {
  if (request.input_layout(0) != TensorLayout{} || request.output_layout(0) != TensorLayout{})
    return nullptr;
  if (request.outputs.size() != 1 || request.inputs.empty() ||
      request.inputs[0].type != ElementType::f32 || request.outputs[0].type != ElementType::f32 ||
      request.inputs[0].shape.rank() < 2)
    return nullptr;
  const resize::Mode mode = resize::read_attributes(request.node).mode;
  if (mode != resize::Mode::linear && mode != resize::Mode::cubic) return nullptr;
  return std::make_unique<InterpolatingResizeKernel>(request);
}

}  // namespace troupe::kernels::onednn
