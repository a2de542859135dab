#include "kernels/reference/pooling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine/ops/spatial.hpp"
#include "kernels/reference/reference.hpp"
#include "kernels/reference/window3d.hpp"

namespace troupe::kernels::reference {

namespace {

bool is_max_pool_type(ElementType type) {
  return is_f32_or_f64(type) || type == ElementType::i8 || type == ElementType::u8;
}

// Like dispatch_float_or_double, plus the 8-bit integer types MaxPool accepts.
template <class Fn>
void dispatch_max_pool(const Node& node, ElementType type, Fn&& fn) {
  switch (type) {
    case ElementType::i8:
      fn(int8_t{});
      return;
    case ElementType::u8:
      fn(uint8_t{});
      return;
    default:
      dispatch_float_or_double(node, type, fn);
  }
}

// The value a window with no tap inside the input yields: padding never wins the max.
template <class T>
T lowest_value() {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                              : std::numeric_limits<T>::lowest();
}

// Y[n,c,o] = max of X[n,c,o*stride - pad_begin + k*dilation] over the taps k inside X; ties keep
// the first tap in row-major order. Indices holds the flat index of that element in X, with the
// spatial part row-major (storage_order 0) or column-major (storage_order 1).
template <class T>
void max_pool_typed(const Node& node, const Tensor& x, Tensor& y, Tensor* indices) {
  const Window3d g = pooling_window(node, x, y);
  const bool column_major = node.attributes.get_int_or("storage_order", 0) != 0;
  const int64_t planes = x.shape()[0] * x.shape()[1];
  const T* src = x.data<T>();
  T* dst = y.data<T>();
  int64_t* index_dst = indices != nullptr ? indices->data<int64_t>() : nullptr;
  for (int64_t p = 0; p < planes; ++p) {
    const T* plane = src + p * g.in_size();
    for (int64_t od = 0; od < g.out[0]; ++od) {
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          bool found = false;
          T best = lowest_value<T>();
          int64_t best_index = 0;
          g.for_each_tap(od, oh, ow, [&](int64_t id, int64_t ih, int64_t iw, int64_t) {
            const T value = plane[g.in_offset(id, ih, iw)];
            if (!found || value > best) {
              found = true;
              best = value;
              best_index =
                  column_major ? id + (ih + iw * g.in[1]) * g.in[0] : g.in_offset(id, ih, iw);
            }
          });
          *dst++ = best;
          if (index_dst != nullptr) *index_dst++ = p * g.in_size() + best_index;
        }
      }
    }
  }
}

// Y[n,c,o] = sum of the taps inside X / count, where count is the number of taps inside X
// (count_include_pad=0) or inside X plus its explicit padding (count_include_pad=1; taps that
// ceil_mode adds beyond the end padding never count).
template <class T>
void average_pool_typed(const Node& node, const Tensor& x, Tensor& y) {
  const Window3d g = pooling_window(node, x, y);
  const bool include_pad = node.attributes.get_int_or("count_include_pad", 0) != 0;
  const int64_t planes = x.shape()[0] * x.shape()[1];
  const T* src = x.data<T>();
  T* dst = y.data<T>();
  for (int64_t p = 0; p < planes; ++p) {
    const T* plane = src + p * g.in_size();
    for (int64_t od = 0; od < g.out[0]; ++od) {
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          double sum = 0.0;
          int64_t count = 0;
          for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
            const int64_t id = g.source(0, od, kd);
            for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
              const int64_t ih = g.source(1, oh, kh);
              for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                const int64_t iw = g.source(2, ow, kw);
                const bool inside = g.inside(0, id) && g.inside(1, ih) && g.inside(2, iw);
                const bool padded =
                    g.inside_padded(0, id) && g.inside_padded(1, ih) && g.inside_padded(2, iw);
                if (inside) sum += static_cast<double>(plane[(id * g.in[1] + ih) * g.in[2] + iw]);
                if (include_pad ? padded : inside) ++count;
              }
            }
          }
          *dst++ = static_cast<T>(count > 0 ? sum / static_cast<double>(count) : 0.0);
        }
      }
    }
  }
}

// |v|^p and its inverse, with p = 1 and p = 2 spelled out so that they are exact.
double lp_term(double v, int64_t p) {
  if (p == 1) return std::abs(v);
  if (p == 2) return v * v;
  return std::pow(std::abs(v), static_cast<double>(p));
}

double lp_root(double sum, int64_t p) {
  if (p == 1) return sum;
  if (p == 2) return std::sqrt(sum);
  return std::pow(sum, 1.0 / static_cast<double>(p));
}

// Y[n,c,o] = (sum of |x|^p over the window's taps inside X)^(1/p): padding counts as zeros.
template <class T>
void lp_pool_typed(const Node& node, const Tensor& x, Tensor& y) {
  const Window3d g = pooling_window(node, x, y);
  const int64_t p = node.attributes.get_int_or("p", 2);
  const int64_t planes = x.shape()[0] * x.shape()[1];
  const T* src = x.data<T>();
  T* dst = y.data<T>();
  for (int64_t plane_index = 0; plane_index < planes; ++plane_index) {
    const T* plane = src + plane_index * g.in_size();
    for (int64_t od = 0; od < g.out[0]; ++od) {
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          double sum = 0.0;
          g.for_each_tap(od, oh, ow, [&](int64_t id, int64_t ih, int64_t iw, int64_t) {
            sum += lp_term(static_cast<double>(plane[g.in_offset(id, ih, iw)]), p);
          });
          *dst++ = static_cast<T>(lp_root(sum, p));
        }
      }
    }
  }
}

int64_t spatial_size(const Shape& shape) {
  int64_t size = 1;
  for (size_t i = 2; i < shape.rank(); ++i) size *= shape[i];
  return size;
}

template <class T>
void global_average_pool_typed(const Tensor& x, Tensor& y) {
  const int64_t planes = x.shape()[0] * x.shape()[1];
  const int64_t size = spatial_size(x.shape());
  const T* src = x.data<T>();
  T* dst = y.data<T>();
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0.0;
    for (int64_t i = 0; i < size; ++i) sum += static_cast<double>(src[p * size + i]);
    dst[p] = static_cast<T>(sum / static_cast<double>(size));
  }
}

template <class T>
void global_max_pool_typed(const Tensor& x, Tensor& y) {
  const int64_t planes = x.shape()[0] * x.shape()[1];
  const int64_t size = spatial_size(x.shape());
  const T* src = x.data<T>();
  T* dst = y.data<T>();
  for (int64_t p = 0; p < planes; ++p) {
    T best = lowest_value<T>();
    for (int64_t i = 0; i < size; ++i)
      if (i == 0 || src[p * size + i] > best) best = src[p * size + i];
    dst[p] = best;
  }
}

template <class T>
void global_lp_pool_typed(const Node& node, const Tensor& x, Tensor& y) {
  const int64_t p = node.attributes.get_int_or("p", 2);
  const int64_t planes = x.shape()[0] * x.shape()[1];
  const int64_t size = spatial_size(x.shape());
  const T* src = x.data<T>();
  T* dst = y.data<T>();
  for (int64_t plane = 0; plane < planes; ++plane) {
    double sum = 0.0;
    for (int64_t i = 0; i < size; ++i)
      sum += lp_term(static_cast<double>(src[plane * size + i]), p);
    dst[plane] = static_cast<T>(lp_root(sum, p));
  }
}

// One roi of MaxRoiPool in feature-map cells: its batch entry, its first row and column, and its
// height and width.
struct RoiCells {
  int64_t batch = 0;
  int64_t top = 0;
  int64_t left = 0;
  int64_t height = 1;
  int64_t width = 1;
};

// A scaled coordinate rounded to its cell. Coordinates far outside any map are pinned where the
// arithmetic below cannot overflow: the bins they make are clipped to the map all the same.
int64_t cell_of(double coordinate, double scale) {
  constexpr double far = static_cast<double>(int64_t{1} << 40);
  return static_cast<int64_t>(std::clamp(std::round(coordinate * scale), -far, far));
}

// The box (x1, y1, x2, y2) scaled by spatial_scale and rounded to cells, both corners included;
// an inverted or empty box counts as one cell, as in Fast R-CNN's RoI pooling.
RoiCells roi_cells(const Node& node, const double* roi, int64_t batch, double scale, int64_t r) {
  for (int k = 0; k < 5; ++k)
    if (!std::isfinite(roi[k]))
      execution_failure(node, "roi " + std::to_string(r) + " has a value that is not finite");
  if (roi[0] < 0 || roi[0] >= static_cast<double>(batch))
    execution_failure(node, "roi " + std::to_string(r) + " has batch index " +
                                std::to_string(roi[0]) + ", outside [0, " + std::to_string(batch) +
                                ")");
  RoiCells cells;
  cells.batch = static_cast<int64_t>(roi[0]);
  cells.left = cell_of(roi[1], scale);
  cells.top = cell_of(roi[2], scale);
  cells.width = std::max<int64_t>(cell_of(roi[3], scale) - cells.left + 1, 1);
  cells.height = std::max<int64_t>(cell_of(roi[4], scale) - cells.top + 1, 1);
  return cells;
}

// The cells [begin, end) of bin `bin` of `bins` over `size` cells from `offset`, clipped to the
// map's `extent`: bins start at floor(bin * size / bins) and end at ceil((bin + 1) * size / bins),
// so neighbouring bins may share a cell and none is skipped.
std::pair<int64_t, int64_t> bin_cells(int64_t bin, int64_t bins, int64_t size, int64_t offset,
                                      int64_t extent) {
  const double bin_size = static_cast<double>(size) / static_cast<double>(bins);
  const auto begin = static_cast<int64_t>(std::floor(static_cast<double>(bin) * bin_size));
  const auto end = static_cast<int64_t>(std::ceil(static_cast<double>(bin + 1) * bin_size));
  return {std::clamp<int64_t>(begin + offset, 0, extent),
          std::clamp<int64_t>(end + offset, 0, extent)};
}

// Y[r, c, i, j] = the largest X[batch, c] value in bin (i, j) of roi r; a bin wholly outside the
// map is 0.
template <class T>
void max_roi_pool_typed(const Node& node, const Tensor& x, const Tensor& rois, Tensor& y) {
  const Shape& xs = x.shape();
  const std::vector<int64_t> pooled = node.attributes.get_ints("pooled_shape");
  const double scale = node.attributes.get_float_or("spatial_scale", 1.0);
  const int64_t count = rois.shape()[0];
  const int64_t channels = xs[1];
  const int64_t height = xs[2];
  const int64_t width = xs[3];
  check_output_shape(node, y, {count, channels, pooled[0], pooled[1]});
  const T* boxes = rois.data<T>();
  T* dst = y.data<T>();
  for (int64_t r = 0; r < count; ++r) {
    const double roi[5] = {static_cast<double>(boxes[r * 5]), static_cast<double>(boxes[r * 5 + 1]),
                           static_cast<double>(boxes[r * 5 + 2]),
                           static_cast<double>(boxes[r * 5 + 3]),
                           static_cast<double>(boxes[r * 5 + 4])};
    const RoiCells cells = roi_cells(node, roi, xs[0], scale, r);
    for (int64_t c = 0; c < channels; ++c) {
      const T* plane = x.data<T>() + (cells.batch * channels + c) * height * width;
      for (int64_t i = 0; i < pooled[0]; ++i) {
        const auto [top, bottom] = bin_cells(i, pooled[0], cells.height, cells.top, height);
        for (int64_t j = 0; j < pooled[1]; ++j) {
          const auto [left, right] = bin_cells(j, pooled[1], cells.width, cells.left, width);
          T best = T(0);
          bool found = false;
          for (int64_t h = top; h < bottom; ++h)
            for (int64_t w = left; w < right; ++w)
              if (!found || plane[h * width + w] > best) {
                best = plane[h * width + w];
                found = true;
              }
          *dst++ = best;
        }
      }
    }
  }
}

std::vector<int64_t> global_dims(const Shape& x) {
  std::vector<int64_t> dims = x.dims();
  for (size_t i = 2; i < dims.size(); ++i) dims[i] = 1;
  return dims;
}

}  // namespace

Window3d pooling_window(const Node& node, const Tensor& x, const Tensor& y) {
  const Shape& xs = x.shape();
  const spatial::Window window = spatial::read_window(node, xs.rank() - 2);
  const spatial::Geometry geometry =
      spatial::forward_geometry(node, window, spatial::spatial_dims(xs));
  std::vector<int64_t> dims{xs[0], xs[1]};
  dims.insert(dims.end(), geometry.output.begin(), geometry.output.end());
  check_output_shape(node, y, dims);
  return to_window3d(window, geometry);
}

std::vector<int64_t> unpooled_dims(const Node& node, const Shape& x, bool has_output_shape) {
  const size_t spatial = x.rank() - 2;
  const std::vector<int64_t> kernel = node.attributes.get_ints("kernel_shape");
  const std::vector<int64_t> strides =
      node.attributes.get_ints_or("strides", std::vector<int64_t>(spatial, 1));
  const std::vector<int64_t> pads =
      node.attributes.get_ints_or("pads", std::vector<int64_t>(2 * spatial, 0));
  if (kernel.size() != spatial || strides.size() != spatial || pads.size() != 2 * spatial)
    execution_failure(node, "kernel_shape, strides and pads do not match input X " + x.to_string());
  std::vector<int64_t> dims{x[0], x[1]};
  for (size_t d = 0; d < spatial; ++d)
    dims.push_back((x[d + 2] - 1) * strides[d] + kernel[d] -
                   (has_output_shape ? 0 : pads[d] + pads[d + spatial]));
  return dims;
}

void max_unpool(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  const Tensor& x = inputs.at(0);
  const Tensor& indices = inputs.at(1);
  Tensor& y = outputs.at(0);
  if (x.shape().rank() < 3 || indices.shape() != x.shape())
    execution_failure(node, "indices I " + indices.shape().to_string() +
                                " must have the shape of X " + x.shape().to_string() +
                                " (rank >= 3)");
  if (indices.element_type() != ElementType::i64)
    execution_failure(node, "indices I have element type " +
                                std::string(to_string(indices.element_type())) + ", expected i64");
  const bool has_output_shape = inputs.size() > 2 && !inputs[2].empty();
  const std::vector<int64_t> unpooled = unpooled_dims(node, x.shape(), has_output_shape);
  std::vector<int64_t> out_dims = unpooled;
  if (has_output_shape) {
    out_dims = inputs[2].to_vector<int64_t>();
    bool fits = out_dims.size() == unpooled.size();
    for (size_t d = 0; fits && d < out_dims.size(); ++d) fits = out_dims[d] >= unpooled[d];
    if (!fits)
      execution_failure(node, "output_shape " + spatial::to_string(out_dims) + " must have rank " +
                                  std::to_string(unpooled.size()) +
                                  " and be at least the unpooled shape " +
                                  spatial::to_string(unpooled));
  }
  check_output_shape(node, y, out_dims);
  // An index addresses the unpooled tensor (as MaxPool's indices address its input); with a
  // larger output_shape that tensor sits in the output's leading corner, as in ONNX's reference.
  int64_t unpooled_size = 1;
  for (int64_t d : unpooled) unpooled_size *= d;
  const int64_t* index = indices.data<int64_t>();
  dispatch_float_or_double(node, x.element_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    std::fill(dst, dst + y.size(), T(0));
    for (int64_t k = 0; k < x.size(); ++k) {
      if (index[k] < 0 || index[k] >= unpooled_size)
        execution_failure(node, "index " + std::to_string(index[k]) + " at flat position " +
                                    std::to_string(k) + " is outside the unpooled shape " +
                                    spatial::to_string(unpooled));
      int64_t rest = index[k];
      int64_t offset = 0;
      int64_t stride = 1;
      for (size_t d = unpooled.size(); d-- > 0;) {
        offset += (rest % unpooled[d]) * stride;
        rest /= unpooled[d];
        stride *= out_dims[d];
      }
      dst[offset] = src[k];
    }
  });
}

void max_pool(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  Tensor* indices = outputs.size() > 1 && !outputs[1].empty() ? &outputs[1] : nullptr;
  dispatch_max_pool(node, inputs.at(0).element_type(), [&](auto tag) {
    max_pool_typed<decltype(tag)>(node, inputs.at(0), outputs.at(0), indices);
  });
}

void average_pool(const Node& node, const std::vector<Tensor>& inputs,
                  std::vector<Tensor>& outputs) {
  dispatch_float_or_double(node, inputs.at(0).element_type(), [&](auto tag) {
    average_pool_typed<decltype(tag)>(node, inputs.at(0), outputs.at(0));
  });
}

void global_average_pool(const Node& node, const std::vector<Tensor>& inputs,
                         std::vector<Tensor>& outputs) {
  check_output_shape(node, outputs.at(0), global_dims(inputs.at(0).shape()));
  dispatch_float_or_double(node, inputs.at(0).element_type(), [&](auto tag) {
    global_average_pool_typed<decltype(tag)>(inputs.at(0), outputs.at(0));
  });
}

void global_max_pool(const Node& node, const std::vector<Tensor>& inputs,
                     std::vector<Tensor>& outputs) {
  check_output_shape(node, outputs.at(0), global_dims(inputs.at(0).shape()));
  dispatch_max_pool(node, inputs.at(0).element_type(), [&](auto tag) {
    global_max_pool_typed<decltype(tag)>(inputs.at(0), outputs.at(0));
  });
}

void lp_pool(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  dispatch_float_or_double(node, inputs.at(0).element_type(), [&](auto tag) {
    lp_pool_typed<decltype(tag)>(node, inputs.at(0), outputs.at(0));
  });
}

void global_lp_pool(const Node& node, const std::vector<Tensor>& inputs,
                    std::vector<Tensor>& outputs) {
  check_output_shape(node, outputs.at(0), global_dims(inputs.at(0).shape()));
  dispatch_float_or_double(node, inputs.at(0).element_type(), [&](auto tag) {
    global_lp_pool_typed<decltype(tag)>(node, inputs.at(0), outputs.at(0));
  });
}

void max_roi_pool(const Node& node, const std::vector<Tensor>& inputs,
                  std::vector<Tensor>& outputs) {
  const Tensor& x = inputs.at(0);
  const Tensor& rois = inputs.at(1);
  if (x.shape().rank() != 4 || rois.shape().rank() != 2 || rois.shape()[1] != 5 ||
      rois.element_type() != x.element_type())
    execution_failure(node, "expected X [N, C, H, W] and rois [num_rois, 5] of one type, got " +
                                x.shape().to_string() + " and " + rois.shape().to_string());
  dispatch_float_or_double(node, x.element_type(), [&](auto tag) {
    max_roi_pool_typed<decltype(tag)>(node, x, rois, outputs.at(0));
  });
}

void register_pooling(KernelRegistry& registry) {
  const auto add = [&](const char* op_type, ReferenceFn fn, bool (*accepts)(ElementType)) {
    registry.add("reference", 0, op_type,
                 [fn, accepts](const KernelRequest& r) -> std::unique_ptr<Kernel> {
                   if (r.inputs.empty() || !accepts(r.inputs[0].type)) return nullptr;
                   return make_reference_kernel(r.node, fn);
                 });
  };
  add("MaxPool", &max_pool, &is_max_pool_type);
  add("AveragePool", &average_pool, &is_f32_or_f64);
  add("GlobalAveragePool", &global_average_pool, &is_f32_or_f64);
  add("GlobalMaxPool", &global_max_pool, &is_max_pool_type);
  add("MaxUnpool", &max_unpool, &is_f32_or_f64);
  add("LpPool", &lp_pool, &is_f32_or_f64);
  add("GlobalLpPool", &global_lp_pool, &is_f32_or_f64);
  add("MaxRoiPool", &max_roi_pool, &is_f32_or_f64);
}

}  // namespace troupe::kernels::reference
