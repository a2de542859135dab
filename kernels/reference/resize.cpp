#include "kernels/reference/resize.hpp"

#include <algorithm>
#include <array>
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

// The input coordinate that output coordinate `x` of one axis samples. `resized` is the output
// length as in * scale, not rounded down, when the scale was given (it is the size otherwise); the
// ONNX reference uses it so in align_corners, pytorch_half_pixel and tf_crop_and_resize.
double source_coordinate(CoordinateMode mode, double x, double scale, int64_t in, double resized,
                         double roi_start, double roi_end) {
  const auto in_last = static_cast<double>(in - 1);
  switch (mode) {
    case CoordinateMode::half_pixel:
      return (x + 0.5) / scale - 0.5;
    case CoordinateMode::pytorch_half_pixel:
      return resized > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case CoordinateMode::align_corners:
      return resized != 1 ? x * in_last / (resized - 1) : 0.0;
    case CoordinateMode::asymmetric:
      return x / scale;
    case CoordinateMode::tf_half_pixel_for_nn:
      return (x + 0.5) / scale;
    case CoordinateMode::tf_crop_and_resize:
      return resized != 1
                 ? roi_start * in_last + x * (roi_end - roi_start) * in_last / (resized - 1)
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

// Keys' cubic convolution kernel with parameter a, at distance d from the sampled point.
double cubic_weight(double d, double a) {
  d = std::fabs(d);
  if (d <= 1.0) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2.0) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0.0;
}

using Sample = ResizeSample;

Sample sample_at(const resize::Attributes& attributes, double x, int64_t in) {
  Sample s;
  s.outside = attributes.coordinate_mode == CoordinateMode::tf_crop_and_resize &&
              (x < 0.0 || x > static_cast<double>(in - 1));
  const auto add = [&](int64_t i, double w) {
    s.index[static_cast<size_t>(s.taps)] = std::clamp<int64_t>(i, 0, in - 1);
    s.weight[static_cast<size_t>(s.taps)] = w;
    ++s.taps;
  };
  const auto base = static_cast<int64_t>(std::floor(x));
  const double t = x - std::floor(x);
  switch (attributes.mode) {
    case resize::Mode::nearest:
      add(nearest_index(attributes.nearest_mode, x), 1.0);
      break;
    case resize::Mode::linear:
      add(base, 1.0 - t);
      add(base + 1, t);
      break;
    case resize::Mode::cubic: {
      double total = 0.0;
      for (int64_t i = base - 1; i <= base + 2; ++i) {
        double w = cubic_weight(x - static_cast<double>(i), attributes.cubic_coeff_a);
        if (attributes.exclude_outside && (i < 0 || i >= in)) w = 0.0;
        add(i, w);
        total += w;
      }
      if (attributes.exclude_outside)
        for (double& w : s.weight) w /= total;
      break;
    }
  }
  return s;
}

// Per axis, how each output index samples the input (the scales, roi and sizes of the inputs).
std::vector<std::vector<Sample>> samples_of(const resize::Attributes& attributes,
                                            const std::vector<Tensor>& inputs,
                                            const std::vector<int64_t>& in_dims,
                                            const std::vector<int64_t>& out_dims) {
  const size_t rank = in_dims.size();
  const bool has_roi = has_values(inputs, 1);
  const bool has_scales = has_values(inputs, 2);
  std::vector<std::vector<Sample>> samples(rank);
  for (size_t a = 0; a < rank; ++a) {
    const double scale = has_scales
                             ? inputs[2].value_at(static_cast<int64_t>(a))
                             : static_cast<double>(out_dims[a]) / static_cast<double>(in_dims[a]);
    const double resized =
        has_scales ? static_cast<double>(in_dims[a]) * scale : static_cast<double>(out_dims[a]);
    const double roi_start = has_roi ? inputs[1].value_at(static_cast<int64_t>(a)) : 0.0;
    const double roi_end = has_roi ? inputs[1].value_at(static_cast<int64_t>(a + rank)) : 1.0;
    for (int64_t o = 0; o < out_dims[a]; ++o) {
      const double source = source_coordinate(attributes.coordinate_mode, static_cast<double>(o),
                                              scale, in_dims[a], resized, roi_start, roi_end);
      samples[a].push_back(sample_at(attributes, source, in_dims[a]));
    }
  }
  return samples;
}

// Y[o] = the sum over every combination of one tap per axis of X[tap indices] times the product
// of the tap weights (nearest: the single tap, copied exactly); extrapolation_value where
// tf_crop_and_resize sampled outside X.
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

  const std::vector<std::vector<Sample>> samples =
      samples_of(attributes, inputs, in_dims, out_dims);
  const std::vector<int64_t> in_strides = row_major_strides(x.shape());

  const T* src = x.data<T>();
  T* dst = y.data<T>();
  std::vector<int64_t> index(rank, 0);  // the output index being computed
  // Sum over the taps of axes a.. given the weight and input offset chosen for axes ..a-1.
  const auto interpolate = [&](const auto& self, size_t a, double weight, int64_t offset) {
    if (a == rank) return weight * static_cast<double>(src[offset]);
    const Sample& s = samples[a][static_cast<size_t>(index[a])];
    double sum = 0.0;
    for (size_t k = 0; k < static_cast<size_t>(s.taps); ++k)
      if (s.weight[k] != 0.0)
        sum += self(self, a + 1, weight * s.weight[k], offset + s.index[k] * in_strides[a]);
    return sum;
  };
  const int64_t total = y.size();
  for (int64_t flat = 0; flat < total; ++flat) {
    bool outside = false;
    int64_t nearest_offset = 0;
    for (size_t a = 0; a < rank; ++a) {
      const Sample& s = samples[a][static_cast<size_t>(index[a])];
      outside |= s.outside;
      nearest_offset += s.index[0] * in_strides[a];
    }
    if (outside)
      dst[flat] = static_cast<T>(attributes.extrapolation_value);
    else if (attributes.mode == resize::Mode::nearest)
      dst[flat] = src[nearest_offset];
    else
      dst[flat] = static_cast<T>(interpolate(interpolate, 0, 1.0, 0));
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

std::vector<std::vector<ResizeSample>> resize_samples(const Node& node,
                                                      const std::vector<Tensor>& inputs,
                                                      const std::vector<int64_t>& out_dims) {
  const std::vector<int64_t>& in_dims = inputs.at(0).shape().dims();
  if (out_dims.size() != in_dims.size()) return {};
  return samples_of(resize::read_attributes(node), inputs, in_dims, out_dims);
}

std::vector<std::vector<int64_t>> nearest_source_indices(const Node& node,
                                                         const std::vector<Tensor>& inputs,
                                                         const std::vector<int64_t>& out_dims) {
  const resize::Attributes attributes = resize::read_attributes(node);
  const std::vector<int64_t>& in_dims = inputs.at(0).shape().dims();
  if (attributes.mode != resize::Mode::nearest || out_dims.size() != in_dims.size()) return {};
  std::vector<std::vector<int64_t>> indices;
  for (const std::vector<Sample>& axis : samples_of(attributes, inputs, in_dims, out_dims)) {
    indices.emplace_back();
    for (const Sample& s : axis) {
      if (s.outside) return {};
      indices.back().push_back(s.index[0]);
    }
  }
  return indices;
}

void resize(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  Tensor& y = outputs.at(0);
  switch (inputs.at(0).element_type()) {
    case ElementType::i8:
      return resize_typed<int8_t>(node, inputs, y);
    case ElementType::u8:
      return resize_typed<uint8_t>(node, inputs, y);
    case ElementType::i32:
      return resize_typed<int32_t>(node, inputs, y);
    case ElementType::i64:
      return resize_typed<int64_t>(node, inputs, y);
    default:
      dispatch_float_or_double(node, inputs.at(0).element_type(),
                               [&](auto tag) { resize_typed<decltype(tag)>(node, inputs, y); });
  }
}

void register_resize(KernelRegistry& registry) {
  registry.add("reference", 0, "Resize", [](const KernelRequest& r) -> std::unique_ptr<Kernel> {
    if (r.inputs.empty()) return nullptr;
    const bool nearest = r.node.attributes.get_string_or("mode", "nearest") == "nearest";
    const ElementType type = r.inputs[0].type;
    if (nearest ? !is_nearest_type(type) : !is_f32_or_f64(type)) return nullptr;
    return make_reference_kernel(r.node, &resize);
  });
}

}  // namespace troupe::kernels::reference
