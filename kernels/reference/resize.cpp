#include "kernels/reference/resize.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/ops/resize.hpp"
#include "kernels/reference/reference.hpp"
#include "kernels/reference/window3d.hpp"

namespace troupe::kernels::reference {

namespace {

using resize::CoordinateMode;
using resize::NearestMode;

bool has_values(const std::vector<Tensor>& inputs, size_t i) {
  return i < inputs.size() && !inputs[i].empty() && inputs[i].size() > 0;
}

// The input coordinate that output coordinate `x` of one axis samples.
double source_coordinate(CoordinateMode mode, double x, double scale, int64_t in, int64_t out,
                         double roi_start, double roi_end) {
  const auto in_last = static_cast<double>(in - 1);
  switch (mode) {
    case CoordinateMode::half_pixel:
      return (x + 0.5) / scale - 0.5;
    case CoordinateMode::pytorch_half_pixel:
      return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case CoordinateMode::align_corners:
      return out > 1 ? x * in_last / static_cast<double>(out - 1) : 0.0;
    case CoordinateMode::asymmetric:
      return x / scale;
    case CoordinateMode::tf_half_pixel_for_nn:
      return (x + 0.5) / scale;
    case CoordinateMode::tf_crop_and_resize:
      return out > 1 ? roi_start * in_last +
                           x * (roi_end - roi_start) * in_last / static_cast<double>(out - 1)
                     : 0.5 * (roi_start + roi_end) * in_last;
  }
  return 0.0;
}

int64_t nearest_index(NearestMode mode, double x) {
  const bool halfway = x == std::floor(x) + 0.5;
  switch (mode) {
    case NearestMode::round_prefer_floor:
      return static_cast<int64_t>(halfway ? std::floor(x) : std::round(x));
    case NearestMode::round_prefer_ceil:
      return static_cast<int64_t>(halfway ? std::ceil(x) : std::round(x));
    case NearestMode::floor:
      return static_cast<int64_t>(std::floor(x));
    case NearestMode::ceil:
      return static_cast<int64_t>(std::ceil(x));
  }
  return 0;
}

// How one output index of one axis reads the input: nearest uses `low` only; linear blends
// `low` and `high` with weights 1 - high_weight and high_weight.
struct Sample {
  int64_t low = 0;
  int64_t high = 0;
  double high_weight = 0.0;
  bool outside = false;  // tf_crop_and_resize sampled outside X: the output is extrapolation_value
};

std::vector<Sample> axis_samples(const resize::Attributes& attributes, double scale, int64_t in,
                                 int64_t out, double roi_start, double roi_end) {
  std::vector<Sample> samples(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    Sample& s = samples[static_cast<size_t>(o)];
    const double x = source_coordinate(attributes.coordinate_mode, static_cast<double>(o), scale,
                                       in, out, roi_start, roi_end);
    s.outside = attributes.coordinate_mode == CoordinateMode::tf_crop_and_resize &&
                (x < 0.0 || x > static_cast<double>(in - 1));
    if (attributes.mode == resize::Mode::nearest) {
      s.low = std::clamp<int64_t>(nearest_index(attributes.nearest_mode, x), 0, in - 1);
      s.high = s.low;
    } else {
      // Clamping to the edge equals interpolating in an input extended by its edge values.
      const double clamped = std::clamp(x, 0.0, static_cast<double>(in - 1));
      s.low = static_cast<int64_t>(std::floor(clamped));
      s.high = std::min(s.low + 1, in - 1);
      s.high_weight = clamped - static_cast<double>(s.low);
    }
  }
  return samples;
}

// Y[o1..or] = nearest: X[low1..lowr]; linear: the sum over the 2^r corners of the cell around the
// sampled point of X[corner] times the product of its per-axis weights.
template <class T>
void resize_typed(const Node& node, const std::vector<Tensor>& inputs, Tensor& y) {
  const resize::Attributes attributes = resize::read_attributes(node);
  const Tensor& x = inputs.at(0);
  const std::vector<int64_t>& in_dims = x.shape().dims();
  const std::vector<int64_t>& out_dims = y.shape().dims();
  const size_t rank = in_dims.size();
  if (out_dims.size() != rank)
    execution_failure(node, "output tensor has shape " + y.shape().to_string() +
                                ", expected the rank of X " + x.shape().to_string());

  const bool has_roi = has_values(inputs, 1);
  const bool has_scales = has_values(inputs, 2);
  std::vector<std::vector<Sample>> samples(rank);
  for (size_t a = 0; a < rank; ++a) {
    const double scale = has_scales ? inputs[2].value_at(static_cast<int64_t>(a))
                                    : static_cast<double>(out_dims[a]) /
                                          static_cast<double>(in_dims[a]);
    const double roi_start = has_roi ? inputs[1].value_at(static_cast<int64_t>(a)) : 0.0;
    const double roi_end = has_roi ? inputs[1].value_at(static_cast<int64_t>(a + rank)) : 1.0;
    samples[a] = axis_samples(attributes, scale, in_dims[a], out_dims[a], roi_start, roi_end);
  }
  const std::vector<int64_t> in_strides = row_major_strides(x.shape());

  const T* src = x.data<T>();
  T* dst = y.data<T>();
  const auto extrapolation = static_cast<T>(attributes.extrapolation_value);
  std::vector<int64_t> index(rank, 0);
  const int64_t total = y.size();
  for (int64_t flat = 0; flat < total; ++flat) {
    bool outside = false;
    for (size_t a = 0; a < rank; ++a) outside |= samples[a][static_cast<size_t>(index[a])].outside;
    if (outside) {
      dst[flat] = extrapolation;
    } else if (attributes.mode == resize::Mode::nearest) {
      int64_t offset = 0;
      for (size_t a = 0; a < rank; ++a)
        offset += samples[a][static_cast<size_t>(index[a])].low * in_strides[a];
      dst[flat] = src[offset];
    } else {
      double sum = 0.0;
      for (uint64_t corner = 0; corner < (uint64_t{1} << rank); ++corner) {
        double weight = 1.0;
        int64_t offset = 0;
        for (size_t a = 0; a < rank && weight != 0.0; ++a) {
          const Sample& s = samples[a][static_cast<size_t>(index[a])];
          const bool high = ((corner >> a) & 1U) != 0;
          weight *= high ? s.high_weight : 1.0 - s.high_weight;
          offset += (high ? s.high : s.low) * in_strides[a];
        }
        if (weight != 0.0) sum += weight * static_cast<double>(src[offset]);
      }
      dst[flat] = static_cast<T>(sum);
    }
    for (size_t a = rank; a-- > 0;) {  // next output index, row-major
      if (++index[a] < out_dims[a]) break;
      index[a] = 0;
    }
  }
}

bool is_nearest_type(ElementType type) {
  return is_f32_or_f64(type) || type == ElementType::i8 || type == ElementType::u8 ||
         type == ElementType::i32 || type == ElementType::i64;
}

}  // namespace

void resize(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  Tensor& y = outputs.at(0);
  switch (inputs.at(0).element_type()) {
    case ElementType::i8: return resize_typed<int8_t>(node, inputs, y);
    case ElementType::u8: return resize_typed<uint8_t>(node, inputs, y);
    case ElementType::i32: return resize_typed<int32_t>(node, inputs, y);
    case ElementType::i64: return resize_typed<int64_t>(node, inputs, y);
    default:
      dispatch_floating(node, inputs.at(0).element_type(),
                        [&](auto tag) { resize_typed<decltype(tag)>(node, inputs, y); });
  }
}

void register_resize(KernelRegistry& registry) {
  registry.add("reference", 0, "Resize", [](const KernelRequest& r) -> std::unique_ptr<Kernel> {
    if (r.inputs.empty()) return nullptr;
    const bool linear = r.node.attributes.get_string_or("mode", "nearest") == "linear";
    const ElementType type = r.inputs[0].type;
    if (linear ? !is_f32_or_f64(type) : !is_nearest_type(type)) return nullptr;
    return make_reference_kernel(r.node, &resize);
  });
}

}  // namespace troupe::kernels::reference
