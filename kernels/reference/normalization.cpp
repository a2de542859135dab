#include "kernels/reference/normalization.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/reference/common.hpp"
#include "kernels/reference/fused_post_ops.hpp"
#include "kernels/reference/reference.hpp"
#include "kernels/reference/window3d.hpp"

namespace troupe::kernels::reference {

namespace {

int64_t product(const Shape& shape, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= shape[i];
  return p;
}

void check_same_shape(const Node& node, const Tensor& x, const Tensor& y) {
  check_output_shape(node, y, x.shape().dims());
}

void store_statistic(Tensor& t, int64_t i, double value) {
  switch (t.element_type()) {
    case ElementType::f32:
      t.data<float>()[i] = static_cast<float>(value);
      return;
    case ElementType::f64:
      t.data<double>()[i] = value;
      return;
    case ElementType::f16:
      t.data<float16>()[i] = float16(static_cast<float>(value));
      return;
    case ElementType::bf16:
      t.data<bfloat16>()[i] = bfloat16(static_cast<float>(value));
      return;
    default:
      throw ExecutionError("cannot store a statistic in a tensor of element type " +
                           std::string(to_string(t.element_type())));
  }
}

// y = (x - mean) / sqrt(var + epsilon) * scale + bias per channel. In inference mode mean and var
// are the inputs (the running statistics); with training_mode=1 they are the batch's own (over N
// and the spatial dims, the population variance), and the optional outputs 1 and 2 get the running
// statistics moved towards them: running = input * momentum + batch * (1 - momentum).
template <class T>
void batch_normalization_typed(const Node& node, const std::vector<Tensor>& in,
                               std::vector<Tensor>& out) {
  const Tensor& x = in.at(0);
  const double epsilon = node.attributes.get_float_or("epsilon", 1e-5);
  const bool training = node.attributes.get_int_or("training_mode", 0) != 0;
  const std::vector<double> scale = values_as_double(in.at(1));
  const std::vector<double> bias = values_as_double(in.at(2));
  std::vector<double> mean = values_as_double(in.at(3));
  std::vector<double> var = values_as_double(in.at(4));
  const int64_t batch = x.shape()[0];
  const int64_t channels = x.shape()[1];
  const int64_t size = product(x.shape(), 2, x.shape().rank());
  const T* src = x.data<T>();
  if (training) {
    const std::vector<double> running_mean = mean;
    const std::vector<double> running_var = var;
    const auto count = static_cast<double>(batch * size);
    for (int64_t c = 0; c < channels; ++c) {
      const auto k = static_cast<size_t>(c);
      double sum = 0.0;
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t i = 0; i < size; ++i)
          sum += static_cast<double>(src[(n * channels + c) * size + i]);
      mean[k] = sum / count;
      double squares = 0.0;
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t i = 0; i < size; ++i) {
          const double d = static_cast<double>(src[(n * channels + c) * size + i]) - mean[k];
          squares += d * d;
        }
      var[k] = squares / count;
    }
    const double momentum = node.attributes.get_float_or("momentum", 0.9);
    for (size_t o = 1; o < out.size() && o < 3; ++o) {
      const std::vector<double>& running = o == 1 ? running_mean : running_var;
      const std::vector<double>& current = o == 1 ? mean : var;
      Tensor& t = out[o];
      check_output_shape(node, t, {channels});
      for (int64_t c = 0; c < channels; ++c) {
        const auto k = static_cast<size_t>(c);
        store_statistic(t, c, running[k] * momentum + current[k] * (1 - momentum));
      }
    }
  }
  T* dst = out.at(0).data<T>();
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      const auto k = static_cast<size_t>(c);
      const double inv_std = 1.0 / std::sqrt(var[k] + epsilon);
      const int64_t offset = (n * channels + c) * size;
      for (int64_t i = offset; i < offset + size; ++i)
        dst[i] =
            static_cast<T>((static_cast<double>(src[i]) - mean[k]) * inv_std * scale[k] + bias[k]);
    }
  }
}

// Population mean and 1/sqrt(variance + epsilon) of `count` values.
struct Moments {
  double mean;
  double inv_std;
};

template <class T>
Moments moments(const T* values, int64_t count, double epsilon) {
  double sum = 0.0;
  for (int64_t i = 0; i < count; ++i) sum += static_cast<double>(values[i]);
  const double mean = sum / static_cast<double>(count);
  double squares = 0.0;
  for (int64_t i = 0; i < count; ++i) {
    const double d = static_cast<double>(values[i]) - mean;
    squares += d * d;
  }
  return {mean, 1.0 / std::sqrt(squares / static_cast<double>(count) + epsilon)};
}

template <class T>
void instance_normalization_typed(const Node& node, const std::vector<Tensor>& in, Tensor& y) {
  const Tensor& x = in.at(0);
  const double epsilon = node.attributes.get_float_or("epsilon", 1e-5);
  const std::vector<double> scale = values_as_double(in.at(1));
  const std::vector<double> bias = values_as_double(in.at(2));
  const int64_t channels = x.shape()[1];
  const int64_t planes = x.shape()[0] * channels;
  const int64_t size = product(x.shape(), 2, x.shape().rank());
  const T* src = x.data<T>();
  T* dst = y.data<T>();
  for (int64_t p = 0; p < planes; ++p) {
    const auto c = static_cast<size_t>(p % channels);
    const Moments m = moments(src + p * size, size, epsilon);
    for (int64_t i = p * size; i < (p + 1) * size; ++i)
      dst[i] =
          static_cast<T>((static_cast<double>(src[i]) - m.mean) * m.inv_std * scale[c] + bias[c]);
  }
}

// Expands a parameter that broadcasts (numpy rules, aligned right) onto `dims` to one value per
// element of `dims`, in row-major order.
std::vector<double> broadcast_to(const Tensor& param, const std::vector<int64_t>& dims) {
  const std::vector<double> values = values_as_double(param);
  const std::vector<int64_t>& pdims = param.shape().dims();
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  std::vector<double> result(static_cast<size_t>(total));
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat;
    int64_t source = 0;
    int64_t stride = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      const size_t axis = dims.size() - 1 - i;
      const int64_t index = rest % dims[axis];
      rest /= dims[axis];
      if (i < pdims.size()) {
        const int64_t pdim = pdims[pdims.size() - 1 - i];
        if (pdim != 1) source += index * stride;
        stride *= pdim;
      }
    }
    result[static_cast<size_t>(flat)] = values[static_cast<size_t>(source)];
  }
  return result;
}

template <class T>
void layer_normalization_typed(const Node& node, const std::vector<Tensor>& in,
                               std::vector<Tensor>& out) {
  const Tensor& x = in.at(0);
  const Shape& shape = x.shape();
  const auto rank = static_cast<int64_t>(shape.rank());
  int64_t axis = node.attributes.get_int_or("axis", -1);
  if (axis < 0) axis += rank;
  const auto first = static_cast<size_t>(axis);
  const double epsilon = node.attributes.get_float_or("epsilon", 1e-5);
  const std::vector<int64_t> normalized(shape.dims().begin() + axis, shape.dims().end());
  const std::vector<double> scale = broadcast_to(in.at(1), normalized);
  const bool has_bias = in.size() > 2 && !in[2].empty();
  const std::vector<double> bias =
      has_bias ? broadcast_to(in[2], normalized) : std::vector<double>(scale.size(), 0.0);
  Tensor* mean_out = out.size() > 1 && !out[1].empty() ? &out[1] : nullptr;
  Tensor* inv_std_out = out.size() > 2 && !out[2].empty() ? &out[2] : nullptr;

  const int64_t rows = product(shape, 0, first);
  const int64_t size = product(shape, first, shape.rank());
  const T* src = x.data<T>();
  T* dst = out.at(0).data<T>();
  for (int64_t r = 0; r < rows; ++r) {
    const Moments m = moments(src + r * size, size, epsilon);
    for (int64_t j = 0; j < size; ++j) {
      const auto k = static_cast<size_t>(j);
      const int64_t i = r * size + j;
      dst[i] =
          static_cast<T>((static_cast<double>(src[i]) - m.mean) * m.inv_std * scale[k] + bias[k]);
    }
    if (mean_out != nullptr) store_statistic(*mean_out, r, m.mean);
    if (inv_std_out != nullptr) store_statistic(*inv_std_out, r, m.inv_std);
  }
}

// Y = X / (bias + alpha / size * sum of X^2 over the channels c - floor((size-1)/2) ..
//     c + ceil((size-1)/2) that exist) ^ beta
template <class T>
void lrn_typed(const Node& node, const Tensor& x, Tensor& y) {
  const double alpha = node.attributes.get_float_or("alpha", 1e-4);
  const double beta = node.attributes.get_float_or("beta", 0.75);
  const double bias = node.attributes.get_float_or("bias", 1.0);
  const int64_t size = node.attributes.get_int("size");
  const int64_t before = (size - 1) / 2;
  const int64_t after = size - 1 - before;
  const int64_t batch = x.shape()[0];
  const int64_t channels = x.shape()[1];
  const int64_t plane = product(x.shape(), 2, x.shape().rank());
  const T* src = x.data<T>();
  T* dst = y.data<T>();
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t i = 0; i < plane; ++i) {
        double squares = 0.0;
        for (int64_t k = std::max<int64_t>(0, c - before);
             k <= std::min<int64_t>(channels - 1, c + after); ++k) {
          const double v = static_cast<double>(src[(n * channels + k) * plane + i]);
          squares += v * v;
        }
        const int64_t at = (n * channels + c) * plane + i;
        dst[at] =
            static_cast<T>(static_cast<double>(src[at]) /
                           std::pow(bias + alpha / static_cast<double>(size) * squares, beta));
      }
    }
  }
}

// Every element belongs to the group of elements that differ from it only along `axes`; the
// group's mean and the root of its mean squared deviation normalize it, as ONNX's function body
// does: (x - mean) / (sqrt(mean(x²) - mean²) + 1e-9).
template <class T>
void mean_variance_normalization_typed(const Node& node, const Tensor& x, Tensor& y) {
  const std::vector<int64_t>& dims = x.shape().dims();
  std::vector<bool> reduced(dims.size(), false);
  const auto rank = static_cast<int64_t>(dims.size());
  for (int64_t a : node.attributes.get_ints_or("axes", {0, 2, 3})) {
    if (a < -rank || a >= rank)
      throw ExecutionError("MeanVarianceNormalization node '" + node.name + "': axis " +
                           std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  }
  // The group of a flat index: its index with the reduced axes dropped, row-major.
  const int64_t total = x.size();
  std::vector<int64_t> group(static_cast<size_t>(total));
  int64_t groups = 1;
  for (size_t d = 0; d < dims.size(); ++d)
    if (!reduced[d]) groups *= dims[d];
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t g = 0;
    int64_t rest = flat;
    int64_t scale = 1;
    for (size_t d = dims.size(); d-- > 0;) {
      const int64_t i = rest % dims[d];
      rest /= dims[d];
      if (reduced[d]) continue;
      g += i * scale;
      scale *= dims[d];
    }
    group[static_cast<size_t>(flat)] = g;
  }
  const T* src = x.data<T>();
  std::vector<double> sum(static_cast<size_t>(groups)), squares(static_cast<size_t>(groups));
  const double count = static_cast<double>(total) / static_cast<double>(groups);
  for (int64_t flat = 0; flat < total; ++flat) {
    const auto g = static_cast<size_t>(group[static_cast<size_t>(flat)]);
    const auto v = static_cast<double>(src[flat]);
    sum[g] += v;
    squares[g] += v * v;
  }
  T* dst = y.data<T>();
  for (int64_t flat = 0; flat < total; ++flat) {
    const auto g = static_cast<size_t>(group[static_cast<size_t>(flat)]);
    const double mean = sum[g] / count;
    const double deviation = std::sqrt(std::max(0.0, squares[g] / count - mean * mean));
    dst[flat] = static_cast<T>((static_cast<double>(src[flat]) - mean) / (deviation + 1e-9));
  }
}

// Y = X / ||X||_p, the norm taken over each line of elements along `axis`: the sum of |x| (p = 1)
// or the root of the sum of squares (p = 2). A line of zeros stays zero, as in onnxruntime,
// rather than becoming 0 / 0.
template <class T>
void lp_normalization_typed(const Node& node, const Tensor& x, Tensor& y) {
  const Shape& shape = x.shape();
  const auto rank = static_cast<int64_t>(shape.rank());
  const int64_t attribute = node.attributes.get_int_or("axis", -1);
  if (attribute < -rank || attribute >= rank)
    execution_failure(
        node, "axis " + std::to_string(attribute) + " is out of range for X " + shape.to_string());
  const auto axis = static_cast<size_t>(attribute < 0 ? attribute + rank : attribute);
  const bool p1 = node.attributes.get_int_or("p", 2) == 1;
  const int64_t outer = product(shape, 0, axis);
  const int64_t length = shape[axis];
  const int64_t inner = product(shape, axis + 1, shape.rank());
  const T* src = x.data<T>();
  T* dst = y.data<T>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t first = o * length * inner + i;
      double norm = 0.0;
      for (int64_t k = 0; k < length; ++k) {
        const double v = static_cast<double>(src[first + k * inner]);
        norm += p1 ? std::abs(v) : v * v;
      }
      if (!p1) norm = std::sqrt(norm);
      for (int64_t k = 0; k < length; ++k) {
        const int64_t at = first + k * inner;
        dst[at] = norm == 0.0 ? T(0) : static_cast<T>(static_cast<double>(src[at]) / norm);
      }
    }
  }
}

}  // namespace

void batch_normalization(const Node& node, const std::vector<Tensor>& inputs,
                         std::vector<Tensor>& outputs) {
  check_same_shape(node, inputs.at(0), outputs.at(0));
  dispatch_float_or_double(node, inputs.at(0).element_type(), [&](auto tag) {
    batch_normalization_typed<decltype(tag)>(node, inputs, outputs);
  });
  apply_fused_post_ops(node, inputs, outputs[0]);  // a Relu the graph compiler fused
}

void instance_normalization(const Node& node, const std::vector<Tensor>& inputs,
                            std::vector<Tensor>& outputs) {
  check_same_shape(node, inputs.at(0), outputs.at(0));
  dispatch_float_or_double(node, inputs.at(0).element_type(), [&](auto tag) {
    instance_normalization_typed<decltype(tag)>(node, inputs, outputs.at(0));
  });
}

void layer_normalization(const Node& node, const std::vector<Tensor>& inputs,
                         std::vector<Tensor>& outputs) {
  check_same_shape(node, inputs.at(0), outputs.at(0));
  dispatch_float_or_double(node, inputs.at(0).element_type(), [&](auto tag) {
    layer_normalization_typed<decltype(tag)>(node, inputs, outputs);
  });
}

void mean_variance_normalization(const Node& node, const std::vector<Tensor>& inputs,
                                 std::vector<Tensor>& outputs) {
  check_same_shape(node, inputs.at(0), outputs.at(0));
  dispatch_float_or_double(node, inputs.at(0).element_type(), [&](auto tag) {
    mean_variance_normalization_typed<decltype(tag)>(node, inputs.at(0), outputs.at(0));
  });
}

void lrn(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  check_same_shape(node, inputs.at(0), outputs.at(0));
  dispatch_float_or_double(node, inputs.at(0).element_type(), [&](auto tag) {
    lrn_typed<decltype(tag)>(node, inputs.at(0), outputs.at(0));
  });
}

void lp_normalization(const Node& node, const std::vector<Tensor>& inputs,
                      std::vector<Tensor>& outputs) {
  check_same_shape(node, inputs.at(0), outputs.at(0));
  dispatch_float_or_double(node, inputs.at(0).element_type(), [&](auto tag) {
    lp_normalization_typed<decltype(tag)>(node, inputs.at(0), outputs.at(0));
  });
}

void register_normalization(KernelRegistry& registry) {
  const auto add = [&](const char* op_type, ReferenceFn fn) {
    registry.add("reference", 0, op_type, [fn](const KernelRequest& r) -> std::unique_ptr<Kernel> {
      if (r.inputs.empty() || !is_f32_or_f64(r.inputs[0].type)) return nullptr;
      return make_reference_kernel(r.node, fn);
    });
  };
  add("BatchNormalization", &batch_normalization);
  add("InstanceNormalization", &instance_normalization);
  add("LayerNormalization", &layer_normalization);
  add("LRN", &lrn);
  add("MeanVarianceNormalization", &mean_variance_normalization);
  add("LpNormalization", &lp_normalization);
}

}  // namespace troupe::kernels::reference
