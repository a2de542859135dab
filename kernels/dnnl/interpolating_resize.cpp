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

#include <cstdint>
#include <vector>

#include "engine/ops/resize.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/interpolating_resize.hpp"
#include "kernels/dnnl/team.hpp"
#include "kernels/dnnl/vector_exp.hpp"  // TROUPE_ISA_CLONES
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

// Linear taps along a row, two per output element (a single tap's partner has weight 0): the
// sum has no inner loop, and the loop vectorizes with gathers. A bilinear align_corners
// upsampling of [1, 24, 112, 112] to 224 x 224 took 1.48 ms through the taps' lists, one Zen 5
// thread.
struct TwoTaps {
  std::vector<int32_t> first, second;
  std::vector<float> first_weight, second_weight;
};

// The taps of `t` as TwoTaps, or false when an output element has more than two (cubic) or
// none (its sum is 0, which a weight of 0 times a non-finite input would not give).
bool two_taps_of(const Taps& t, TwoTaps& two) {
  const size_t n = t.begin.size() - 1;
  two.first.assign(n, 0);
  two.second.assign(n, 0);
  two.first_weight.assign(n, 0.f);
  two.second_weight.assign(n, 0.f);
  for (size_t o = 0; o < n; ++o) {
    const int64_t first = t.begin[o], count = t.begin[o + 1] - first;
    if (count == 0 || count > 2) return false;
    for (int64_t k = 0; k < count; ++k) {
      const auto at = static_cast<size_t>(first + k);
      (k == 0 ? two.first : two.second)[o] = static_cast<int32_t>(t.index[at]);
      (k == 0 ? two.first_weight : two.second_weight)[o] = t.weight[at];
    }
    if (count < 2) two.second[o] = two.first[o];
  }
  return true;
}

TROUPE_ISA_CLONES void interpolate_row(const float* line, const TwoTaps& taps, float* out,
                                       int64_t n) {
  const int32_t* first = taps.first.data();
  const int32_t* second = taps.second.data();
  const float* first_weight = taps.first_weight.data();
  const float* second_weight = taps.second_weight.data();
  for (int64_t c = 0; c < n; ++c)
    out[c] = first_weight[c] * line[first[c]] + second_weight[c] * line[second[c]];
}

// out = w * a; out = wa * a + wb * b; out += w * a: whole rows, vectorized.
TROUPE_ISA_CLONES void scale_row(const float* a, float w, float* out, int64_t n) {
  for (int64_t c = 0; c < n; ++c) out[c] = w * a[c];
}
TROUPE_ISA_CLONES void blend_rows(const float* a, float wa, const float* b, float wb, float* out,
                                  int64_t n) {
  for (int64_t c = 0; c < n; ++c) out[c] = wa * a[c] + wb * b[c];
}
TROUPE_ISA_CLONES void add_scaled_row(const float* a, float w, float* out, int64_t n) {
  for (int64_t c = 0; c < n; ++c) out[c] += w * a[c];
}

// out[0..n) = the weighted sum of row r's taps among the rows of `plane` (rows of n elements).
void weighted_rows(const float* plane, int64_t n, const Taps& rows, int64_t r, float* out) {
  const auto first = static_cast<size_t>(rows.begin[static_cast<size_t>(r)]);
  const auto last = static_cast<size_t>(rows.begin[static_cast<size_t>(r) + 1]);
  const auto row = [&](size_t t) { return plane + rows.index[t] * n; };
  if (first == last) {
    std::fill(out, out + n, 0.f);
    return;
  }
  if (last - first == 1) {
    scale_row(row(first), rows.weight[first], out, n);
    return;
  }
  blend_rows(row(first), rows.weight[first], row(first + 1), rows.weight[first + 1], out, n);
  for (size_t t = first + 2; t < last; ++t) add_scaled_row(row(t), rows.weight[t], out, n);
}

class InterpolatingResizeKernel final : public Kernel {
 public:
  explicit InterpolatingResizeKernel(const KernelRequest& request) : node_(request.node) {}
  std::string implementation() const override { return "dnnl:separable_rows"; }

  void execute(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override;

 private:
  // Where the rows grow, the columns are interpolated first, once per input row, into `rows_`
  // (the gathers then run for the fewer rows), and each output row is the weighted sum of whole
  // interpolated rows, which vectorizes: [1, 24, 112, 112] to 224 x 224 (align_corners) 0.89 ->
  // 0.53 ms, one Zen 5 thread.
  void upsample_columns_first(const float* src, float* dst, int64_t planes, int64_t in_rows,
                              int64_t in_columns, int64_t out_rows, int64_t out_columns,
                              const Taps& rows, const TwoTaps& columns) {
    rows_.resize(static_cast<size_t>(planes * in_rows * out_columns));
    float* across = rows_.data();
    run_team_if(planes * out_rows * out_columns > (int64_t{1} << 16), [&] {
#pragma omp for schedule(static)
      for (int64_t w = 0; w < planes * in_rows; ++w)
        interpolate_row(src + w * in_columns, columns, across + w * out_columns, out_columns);
#pragma omp for schedule(static)
      for (int64_t w = 0; w < planes * out_rows; ++w)
        weighted_rows(across + w / out_rows * in_rows * out_columns, out_columns, rows,
                      w % out_rows, dst + w * out_columns);
    });
  }

  Node node_;
  std::vector<float> rows_;  // the input rows interpolated along the columns
};

void InterpolatingResizeKernel::execute(const std::vector<Tensor>& inputs,
                                        std::vector<Tensor>& outputs) {
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
  TwoTaps two_columns;
  const bool linear_columns = in_columns < (int64_t{1} << 31) && two_taps_of(columns, two_columns);
  if (linear_columns && out_rows > in_rows) {
    upsample_columns_first(src, dst, planes, in_rows, in_columns, out_rows, out_columns, rows,
                           two_columns);
    return;
  }
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
      if (last - first == 1 && rows.weight[static_cast<size_t>(first)] == 1.f)
        line = in_plane + rows.index[static_cast<size_t>(first)] * in_columns;
      else
        weighted_rows(in_plane, in_columns, rows, r, row.data());
      float* out = dst + (plane * out_rows + r) * out_columns;
      if (linear_columns) {
        interpolate_row(line, two_columns, out, out_columns);
        continue;
      }
      for (int64_t c = 0; c < out_columns; ++c) {
        float sum = 0.f;
        for (int64_t t = columns.begin[static_cast<size_t>(c)];
             t < columns.begin[static_cast<size_t>(c) + 1]; ++t)
          sum +=
              columns.weight[static_cast<size_t>(t)] * line[columns.index[static_cast<size_t>(t)]];
        out[c] = sum;
      }
    }
  });
}

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
