#include "kernels/preprocess/image_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/ir/element_dispatch.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::preprocess {

namespace {

struct Dims {
  int64_t n, c, h, w;
};

Dims dims_of(const Tensor& t, Layout layout) {
  const Shape& s = t.shape();
  if (s.rank() != 4)
    throw InvalidArgument("image preprocessing needs a 4-D tensor, got shape " + s.to_string());
  return layout == Layout::nchw ? Dims{s[0], s[1], s[2], s[3]} : Dims{s[0], s[3], s[1], s[2]};
}

// Element offset of (n, c, y, x) in a dense tensor of the given layout.
inline int64_t offset(const Dims& d, Layout layout, int64_t n, int64_t c, int64_t y, int64_t x) {
  return layout == Layout::nchw ? ((n * d.c + c) * d.h + y) * d.w + x
                                : ((n * d.h + y) * d.w + x) * d.c + c;
}

Shape shape_of(const Dims& d, Layout layout) {
  return layout == Layout::nchw ? Shape{d.n, d.c, d.h, d.w} : Shape{d.n, d.h, d.w, d.c};
}

template <class F>
void for_each_pixel(const Dims& d, F&& f) {
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c; ++c)
      for (int64_t y = 0; y < d.h; ++y)
        for (int64_t x = 0; x < d.w; ++x) f(n, c, y, x);
}

void check_channels(const Dims& d, const std::vector<float>& values, const char* what) {
  if (values.size() != 1 && static_cast<int64_t>(values.size()) != d.c)
    throw InvalidArgument(std::string(what) + " has " + std::to_string(values.size()) +
                          " values for " + std::to_string(d.c) + " channels");
}

template <class Op>
void per_channel(Tensor& image, Layout layout, const std::vector<float>& values, const char* what,
                 Op op) {
  if (!is_floating(image.element_type()))
    throw InvalidArgument(std::string(what) + " needs floating-point data, the tensor is " +
                          std::string(to_string(image.element_type())) +
                          " (convert the element type first)");
  const Dims d = dims_of(image, layout);
  check_channels(d, values, what);
  dispatch_element_type(image.element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(image.raw_data());
    for_each_pixel(d, [&](int64_t n, int64_t c, int64_t y, int64_t x) {
      T& v = p[offset(d, layout, n, c, y, x)];
      const float k = values.size() == 1 ? values[0] : values[static_cast<size_t>(c)];
      v = convert_value<T>(op(static_cast<float>(to_double(v)), k));
    });
  });
}

}  // namespace

Tensor convert_layout(const Tensor& src_in, Layout from, Layout to) {
  Tensor src = src_in.contiguous();
  if (from == to) return src.clone();
  const Dims d = dims_of(src, from);
  Tensor dst(src.element_type(), shape_of(d, to));
  const size_t esize = element_size(src.element_type());
  const auto* s = static_cast<const char*>(src.raw_data());
  auto* t = static_cast<char*>(dst.raw_data());
  for_each_pixel(d, [&](int64_t n, int64_t c, int64_t y, int64_t x) {
    std::memcpy(t + offset(d, to, n, c, y, x) * esize, s + offset(d, from, n, c, y, x) * esize,
                esize);
  });
  return dst;
}

Tensor resize(const Tensor& src_in, Layout layout, int64_t height, int64_t width,
              ResizeAlgorithm algorithm) {
  Tensor src = src_in.contiguous();
  const Dims in = dims_of(src, layout);
  if (height <= 0 || width <= 0)
    throw InvalidArgument("resize to " + std::to_string(height) + "x" + std::to_string(width));
  const Dims out{in.n, in.c, height, width};
  Tensor dst(src.element_type(), shape_of(out, layout));
  const double sy = static_cast<double>(in.h) / static_cast<double>(height);
  const double sx = static_cast<double>(in.w) / static_cast<double>(width);
  dispatch_element_type(src.element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = static_cast<const T*>(src.raw_data());
    T* t = static_cast<T*>(dst.raw_data());
    auto at = [&](int64_t n, int64_t c, int64_t y, int64_t x) {
      return to_double(s[offset(in, layout, n, c, y, x)]);
    };
    for_each_pixel(out, [&](int64_t n, int64_t c, int64_t y, int64_t x) {
      double value;
      if (algorithm == ResizeAlgorithm::nearest) {
        const int64_t iy = std::min(in.h - 1, static_cast<int64_t>(std::floor((y + 0.5) * sy)));
        const int64_t ix = std::min(in.w - 1, static_cast<int64_t>(std::floor((x + 0.5) * sx)));
        value = at(n, c, iy, ix);
      } else {
        const double fy = std::clamp((y + 0.5) * sy - 0.5, 0.0, static_cast<double>(in.h - 1));
        const double fx = std::clamp((x + 0.5) * sx - 0.5, 0.0, static_cast<double>(in.w - 1));
        const int64_t y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
        const int64_t y1 = std::min(y0 + 1, in.h - 1), x1 = std::min(x0 + 1, in.w - 1);
        const double wy = fy - static_cast<double>(y0), wx = fx - static_cast<double>(x0);
        value = (1 - wy) * ((1 - wx) * at(n, c, y0, x0) + wx * at(n, c, y0, x1)) +
                wy * ((1 - wx) * at(n, c, y1, x0) + wx * at(n, c, y1, x1));
        if constexpr (std::is_integral_v<T>) value = std::round(value);
      }
      t[offset(out, layout, n, c, y, x)] = from_double<T>(value);
    });
  });
  return dst;
}

void subtract_mean(Tensor& image, Layout layout, const std::vector<float>& values) {
  per_channel(image, layout, values, "mean", [](float v, float k) { return v - k; });
}

void divide_scale(Tensor& image, Layout layout, const std::vector<float>& values) {
  for (float v : values)
    if (v == 0.f) throw InvalidArgument("scale values must not be zero");
  per_channel(image, layout, values, "scale", [](float v, float k) { return v / k; });
}

Tensor reverse_channels(const Tensor& src_in, Layout layout) {
  Tensor src = src_in.contiguous();
  const Dims d = dims_of(src, layout);
  Tensor dst(src.element_type(), src.shape());
  const size_t esize = element_size(src.element_type());
  const auto* s = static_cast<const char*>(src.raw_data());
  auto* t = static_cast<char*>(dst.raw_data());
  for_each_pixel(d, [&](int64_t n, int64_t c, int64_t y, int64_t x) {
    std::memcpy(t + offset(d, layout, n, d.c - 1 - c, y, x) * esize,
                s + offset(d, layout, n, c, y, x) * esize, esize);
  });
  return dst;
}

Tensor run_preprocessing(const InputPreprocessing& plan, const Tensor& caller,
                         const ValueInfo& model_input) {
  Tensor current = caller.contiguous();
  Layout layout = plan.caller_layout;
  for (const PreprocessStep& step : plan.steps) {
    switch (step.kind) {
      case PreprocessStep::Kind::convert_element_type:
        current = current.convert(step.element_type);
        break;
      case PreprocessStep::Kind::convert_layout:
        current = convert_layout(current, layout, step.layout);
        layout = step.layout;
        break;
      case PreprocessStep::Kind::resize:
        current = resize(current, layout, step.height, step.width, step.algorithm);
        break;
      case PreprocessStep::Kind::mean:
        if (current.raw_data() == caller.raw_data()) current = current.clone();
        subtract_mean(current, layout, step.values);
        break;
      case PreprocessStep::Kind::scale:
        if (current.raw_data() == caller.raw_data()) current = current.clone();
        divide_scale(current, layout, step.values);
        break;
      case PreprocessStep::Kind::reverse_channels:
        current = reverse_channels(current, layout);
        break;
      case PreprocessStep::Kind::convert_color:
        break;  // resolved at build time
    }
  }
  if (current.element_type() != model_input.type) current = current.convert(model_input.type);
  return current;
}

void run_postprocessing(const OutputPostprocessing& plan, const Tensor& model_output,
                        Tensor& caller) {
  if (plan.model_layout != plan.caller_layout) {
    Tensor permuted = convert_layout(model_output, plan.model_layout, plan.caller_layout);
    permuted.copy_to(caller);
  } else {
    model_output.copy_to(caller);
  }
}

}  // namespace troupe::kernels::preprocess
