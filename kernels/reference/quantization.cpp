// Reference kernels of the quantization ops: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, QLinearConv, QLinearMatMul, ConvInteger and MatMulInteger. The integer
// products shift their operands by the zero points into f64 tensors (exact: every partial sum of
// 8-bit products is an integer far below 2^53) and run the reference Conv/MatMul on them; the
// requantization of QLinearConv/QLinearMatMul and its fused post-ops follow
// engine/ops/quantized_post_ops.hpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/ops/quantized_post_ops.hpp"
#include "kernels/reference/broadcast.hpp"
#include "kernels/reference/common.hpp"
#include "kernels/reference/convolution.hpp"
#include "kernels/reference/fused_post_ops.hpp"
#include "kernels/reference/linear_algebra.hpp"
#include "kernels/reference/reference.hpp"

namespace troupe::kernels::reference {

namespace {

using Tensors = std::vector<Tensor>;

// Range of an 8-bit type (u8 when `type` is undefined, an omitted zero point).
struct Range {
  double low;
  double high;
};

Range range_of(const Node& node, ElementType type) {
  switch (type) {
    case ElementType::u8:
    case ElementType::undefined:
      return {0.0, 255.0};
    case ElementType::i8:
      return {-128.0, 127.0};
    case ElementType::i32:
      return {static_cast<double>(std::numeric_limits<int32_t>::min()),
              static_cast<double>(std::numeric_limits<int32_t>::max())};
    default:
      unsupported_type(node, type, "u8, i8 or i32");
  }
}

// ONNX's saturate(round(v)): round half to even (the default rounding mode), clamp to the range;
// NaN becomes 0.
double saturate_round(double v, Range range) {
  if (std::isnan(v)) return std::clamp(0.0, range.low, range.high);
  return std::clamp(std::nearbyint(v), range.low, range.high);
}

// The values of a scale or zero point tensor as doubles; an omitted zero point is `count` zeros.
std::vector<double> quantization_parameter_values(const Tensor& t, int64_t count = 1) {
  if (t.empty()) return std::vector<double>(static_cast<size_t>(std::max<int64_t>(count, 1)), 0.0);
  return values_as_double(t);
}

// Which entry of a per-tensor or per-axis parameter applies to each element of a tensor: for an
// element at flat index i, (i / inner) % count, or 0 for a per-tensor parameter.
struct AxisIndex {
  int64_t inner = 1;
  int64_t count = 1;

  AxisIndex() = default;
  AxisIndex(const Shape& shape, size_t axis, int64_t entries) : count(entries) {
    for (size_t d = axis + 1; d < shape.rank(); ++d) inner *= shape[d];
  }
  size_t operator()(int64_t flat) const {
    return count == 1 ? 0 : static_cast<size_t>((flat / inner) % count);
  }
};

// The axis index of the scale/zero point of QuantizeLinear/DequantizeLinear (attribute `axis`).
AxisIndex linear_axis(const Node& node, const Tensor& x, const Tensor& scale) {
  if (scale.size() == 1) return {};
  const size_t axis = normalize_axis(node, node.attributes.get_int_or("axis", 1), x.shape().rank());
  if (scale.size() != x.shape()[axis])
    fail(node, "scale has " + std::to_string(scale.size()) + " entries but input x " +
                   x.shape().to_string() + " has " + std::to_string(x.shape()[axis]) +
                   " along axis " + std::to_string(axis));
  return AxisIndex(x.shape(), axis, scale.size());
}

// Writes `values` (already rounded and saturated) into `out` of its 8-bit or i32 type.
void store_integers(const Node& node, const std::vector<double>& values, Tensor& out) {
  require_output_size(node, out, static_cast<int64_t>(values.size()));
  switch (out.element_type()) {
    case ElementType::u8:
      std::transform(values.begin(), values.end(), out.data<uint8_t>(),
                     [](double v) { return static_cast<uint8_t>(v); });
      return;
    case ElementType::i8:
      std::transform(values.begin(), values.end(), out.data<int8_t>(),
                     [](double v) { return static_cast<int8_t>(v); });
      return;
    case ElementType::i32:
      std::transform(values.begin(), values.end(), out.data<int32_t>(),
                     [](double v) { return static_cast<int32_t>(v); });
      return;
    default:
      unsupported_type(node, out.element_type(), "u8, i8 or i32", "output");
  }
}

// y = saturate(round(x / y_scale) + y_zero_point), the division in f32 as ONNX specifies.
void quantize_linear(const Node& node, const Tensors& in, Tensors& out) {
  const Tensor x = in.at(0).contiguous();
  const Tensor& scale = in.at(1);
  const Tensor& zero_point = optional_input(in, 2);
  const AxisIndex index = linear_axis(node, x, scale);
  const std::vector<double> scales = quantization_parameter_values(scale);
  const std::vector<double> zero_points = quantization_parameter_values(zero_point, scale.size());
  const Range range = range_of(node, zero_point.element_type());
  std::vector<double> result(static_cast<size_t>(x.size()));
  for (int64_t i = 0; i < x.size(); ++i) {
    const size_t p = index(i);
    const float quotient = static_cast<float>(x.value_at(i)) / static_cast<float>(scales[p]);
    const double rounded =
        std::isnan(quotient) ? 0.0 : std::nearbyint(static_cast<double>(quotient));
    result[static_cast<size_t>(i)] = std::clamp(rounded + zero_points[p], range.low, range.high);
  }
  store_integers(node, result, out.at(0));
}

// y = (x - x_zero_point) * x_scale in f32.
void dequantize_linear(const Node& node, const Tensors& in, Tensors& out) {
  const Tensor x = in.at(0).contiguous();
  const Tensor& scale = in.at(1);
  const AxisIndex index = linear_axis(node, x, scale);
  const std::vector<double> scales = quantization_parameter_values(scale);
  const std::vector<double> zero_points =
      quantization_parameter_values(optional_input(in, 2), scale.size());
  require_output_size(node, out.at(0), x.size());
  float* y = out.at(0).data<float>();
  for (int64_t i = 0; i < x.size(); ++i) {
    const size_t p = index(i);
    y[i] = static_cast<float>(x.value_at(i) - zero_points[p]) * static_cast<float>(scales[p]);
  }
}

// u8 quantization of x over its own range extended to include 0: scale = (max - min) / 255,
// zero_point = saturate(round(-min / scale)), y = saturate(round(x / scale) + zero_point); all in
// f32. An all-zero x gets scale 0, zero point 0 and y = 0.
void dynamic_quantize_linear(const Node& node, const Tensors& in, Tensors& out) {
  const Tensor x = in.at(0).contiguous();
  const float* data = x.data<float>();
  float low = 0.f;
  float high = 0.f;
  for (int64_t i = 0; i < x.size(); ++i) {
    if (std::isnan(data[i])) fail(node, "input x contains NaN; its range is undefined");
    low = std::min(low, data[i]);
    high = std::max(high, data[i]);
  }
  const Range u8{0.0, 255.0};
  const float scale = (high - low) / 255.f;
  const double zero_point = scale == 0.f ? 0.0 : saturate_round(-low / scale, u8);
  std::vector<double> result(static_cast<size_t>(x.size()), 0.0);
  if (scale != 0.f)
    for (int64_t i = 0; i < x.size(); ++i)
      result[static_cast<size_t>(i)] = std::clamp(
          std::nearbyint(static_cast<double>(data[i] / scale)) + zero_point, u8.low, u8.high);
  store_integers(node, result, out.at(0));
  out.at(1).data<float>()[0] = scale;
  out.at(2).data<uint8_t>()[0] = static_cast<uint8_t>(zero_point);
}

// An f64 tensor of `t` minus its zero points, per-tensor or along `index`.
Tensor shifted(const Tensor& t, const std::vector<double>& zero_points, AxisIndex index) {
  const Tensor dense = t.contiguous();
  Tensor result(ElementType::f64, dense.shape());
  double* out = result.data<double>();
  for (int64_t i = 0; i < dense.size(); ++i) out[i] = dense.value_at(i) - zero_points[index(i)];
  return result;
}

AxisIndex per_entry(const Node& node, const Tensor& t, size_t axis, const Tensor& parameter,
                    const std::string& what) {
  if (parameter.empty() || parameter.size() == 1) return {};
  if (axis >= t.shape().rank() || parameter.size() != t.shape()[axis])
    fail(node, what + " has " + std::to_string(parameter.size()) + " entries, expected 1 or " +
                   (axis < t.shape().rank() ? std::to_string(t.shape()[axis]) : std::string("?")));
  return AxisIndex(t.shape(), axis, parameter.size());
}

// The node as the float op it generalizes, without the fused attributes (applied here instead).
Node float_node(const Node& node, const char* op_type) {
  Node plain = node;
  plain.op_type = op_type;
  for (const char* attribute : quantized::fused_attributes) plain.attributes.erase(attribute);
  return plain;
}

// Requantizes `acc`, the f64 product of the shifted operands (bias included) in the output's
// shape, into y: the real value acc * input_scale * weight_scales[channel(i)], the fused residual
// and activation, then saturate(round(real / y_scale) + y_zero_point) (with fused_float_output
// the real value itself, in f32).
void requantize(const Node& node, const Tensors& in, const Tensor& acc, double input_scale,
                const std::vector<double>& weight_scales, AxisIndex channel, const Tensor& y_scale,
                const Tensor& y_zero_point, Tensor& y) {
  const std::string activation = fused::activation(node);
  const bool float_output = quantized::has_float_output(node);  // y is the real value, in f32
  const bool sum = fused::has_sum(node);
  Tensor residual;
  double r_scale = 0.0;
  double r_zero = 0.0;
  if (sum) {
    const size_t r = quantized::plain_inputs(node);
    residual = in.at(r).contiguous();
    r_scale = in.at(r + 1).value_at(0);
    r_zero = in.at(r + 2).value_at(0);
    if (residual.size() != acc.size())
      fail(node, "fused residual " + residual.shape().to_string() + " does not match output " +
                     acc.shape().to_string());
  }
  const double* a = acc.data<double>();
  std::vector<double> result(static_cast<size_t>(acc.size()));
  for (int64_t i = 0; i < acc.size(); ++i) {
    double real = a[i] * input_scale * weight_scales[channel(i)];
    if (sum) real += (residual.value_at(i) - r_zero) * r_scale;
    if (!activation.empty()) real = apply_fused_activation(node, activation, real);
    result[static_cast<size_t>(i)] = real;
  }
  if (float_output) {
    std::transform(result.begin(), result.end(), y.data<float>(),
                   [](double v) { return static_cast<float>(v); });
    return;
  }
  const double out_scale = y_scale.value_at(0);
  const double out_zero = y_zero_point.value_at(0);
  const Range range = range_of(node, y_zero_point.element_type());
  for (double& v : result) {
    const double q = v / out_scale;
    v = std::clamp((std::isnan(q) ? 0.0 : std::nearbyint(q)) + out_zero, range.low, range.high);
  }
  store_integers(node, result, y);
}

// QLinearConv: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
void qlinear_conv(const Node& node, const Tensors& in, Tensors& out) {
  const Tensor& x = in.at(0);
  const Tensor& w = in.at(3);
  const Tensor& w_zero = in.at(5);
  const Tensor& w_scale = in.at(4);
  Tensors operands{shifted(x, quantization_parameter_values(in.at(2)), {}),
                   shifted(w, quantization_parameter_values(w_zero),
                           per_entry(node, w, 0, w_zero, "w_zero_point"))};
  const Tensor& bias = optional_input(in, 8);
  if (!bias.empty()) operands.push_back(bias.convert(ElementType::f64));
  Tensors acc{Tensor(ElementType::f64, out.at(0).shape())};
  conv(float_node(node, "Conv"), operands, acc);
  const AxisIndex channel =
      w_scale.size() == 1 ? AxisIndex{} : AxisIndex(acc[0].shape(), 1, w_scale.size());
  if (w_scale.size() != 1 && w_scale.size() != w.shape()[0])
    fail(node, "w_scale has " + std::to_string(w_scale.size()) + " entries, expected 1 or " +
                   std::to_string(w.shape()[0]));
  requantize(node, in, acc[0], in.at(1).value_at(0), quantization_parameter_values(w_scale),
             channel, in.at(6), in.at(7), out.at(0));
}

// The shifted A and B of a quantized matmul: A's zero point per tensor or per row (a 2-D A),
// B's per tensor or per column.
Tensors shifted_matmul_operands(const Node& node, const Tensor& a, const Tensor& a_zero,
                                const Tensor& b, const Tensor& b_zero) {
  const size_t a_rows = a.shape().rank() >= 2 ? a.shape().rank() - 2 : 0;
  const size_t b_columns = b.shape().rank() >= 2 ? b.shape().rank() - 1 : 0;
  return {shifted(a, quantization_parameter_values(a_zero),
                  per_entry(node, a, a_rows, a_zero, "a_zero_point")),
          shifted(b, quantization_parameter_values(b_zero),
                  per_entry(node, b, b_columns, b_zero, "b_zero_point"))};
}

// QLinearMatMul: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point, and
// the fused i32 bias.
void qlinear_matmul(const Node& node, const Tensors& in, Tensors& out) {
  const Tensor& a_scale = in.at(1);
  if (a_scale.size() != 1)
    fail(node, "per-row a_scale is not supported by troupe; quantize A per tensor");
  const Tensor& b = in.at(3);
  Tensors acc{Tensor(ElementType::f64, out.at(0).shape())};
  matmul(float_node(node, "MatMul"), shifted_matmul_operands(node, in.at(0), in.at(2), b, in.at(5)),
         acc);
  const int64_t n = acc[0].shape().rank() == 0 ? 1 : acc[0].shape()[acc[0].shape().rank() - 1];
  if (fused::has_bias(node)) {
    const Tensor bias = in.at(8).contiguous();
    if (bias.size() != n) fail(node, "fused bias " + bias.shape().to_string() + " is not [N]");
    double* values = acc[0].data<double>();
    for (int64_t i = 0; i < acc[0].size(); ++i) values[i] += bias.value_at(i % n);
  }
  const Tensor& b_scale = in.at(4);
  if (b_scale.size() != 1 && b_scale.size() != n)
    fail(node, "b_scale has " + std::to_string(b_scale.size()) + " entries, expected 1 or " +
                   std::to_string(n));
  AxisIndex channel;
  if (b_scale.size() != 1) {
    channel.inner = 1;
    channel.count = n;
  }
  requantize(node, in, acc[0], a_scale.value_at(0), quantization_parameter_values(b_scale), channel,
             in.at(6), in.at(7), out.at(0));
}

// QLinearAdd: the f32 steps of DQ, DQ, Add, the activation and Q (quantized_post_ops.hpp).
void qlinear_add(const Node& node, const Tensors& in, Tensors& out) {
  const Tensor a = in.at(0).contiguous();
  const Tensor b = in.at(3).contiguous();
  const float a_scale = static_cast<float>(in.at(1).value_at(0));
  const float b_scale = static_cast<float>(in.at(4).value_at(0));
  const float c_scale = static_cast<float>(in.at(6).value_at(0));
  const double a_zero = in.at(2).value_at(0);
  const double b_zero = in.at(5).value_at(0);
  const double c_zero = in.at(7).value_at(0);
  const Range range = range_of(node, in.at(7).element_type());
  const std::string activation = fused::activation(node);
  Tensor& c = out.at(0);
  BroadcastWalker walk(node, c.shape(), {a.shape(), b.shape()});
  std::vector<double> result(static_cast<size_t>(c.size()));
  for (int64_t i = 0; i < c.size(); ++i, walk.next()) {
    const float x = static_cast<float>(a.value_at(walk.offset(0)) - a_zero) * a_scale;
    const float y = static_cast<float>(b.value_at(walk.offset(1)) - b_zero) * b_scale;
    float sum = x + y;
    if (!activation.empty())
      sum = static_cast<float>(apply_fused_activation(node, activation, sum));
    const float q = sum / c_scale;
    const double rounded = std::isnan(q) ? 0.0 : std::nearbyint(static_cast<double>(q));
    result[static_cast<size_t>(i)] = std::clamp(rounded + c_zero, range.low, range.high);
  }
  store_integers(node, result, c);
}

// QLinearConcat: each input dequantized and quantized again with the output's parameters (the
// f32 steps of DequantizeLinear and QuantizeLinear), placed along the axis.
void qlinear_concat(const Node& node, const Tensors& in, Tensors& out) {
  Tensor& y = out.at(0);
  const float y_scale = static_cast<float>(in.at(0).value_at(0));
  const double y_zero = in.at(1).value_at(0);
  const Range range = range_of(node, in.at(1).element_type());
  const size_t rank = y.shape().rank();
  const size_t axis = normalize_axis(node, node.attributes.get_int_or("axis", 1), rank);
  int64_t outer = 1;
  for (size_t d = 0; d < axis; ++d) outer *= y.shape()[d];
  const int64_t y_row = y.size() / std::max<int64_t>(outer, 1);
  std::vector<double> result(static_cast<size_t>(y.size()));
  int64_t offset = 0;
  for (size_t i = 2; i + 2 < in.size(); i += 3) {
    const Tensor x = in[i].contiguous();
    const float x_scale = static_cast<float>(in[i + 1].value_at(0));
    const double x_zero = in[i + 2].value_at(0);
    const int64_t row = x.size() / std::max<int64_t>(outer, 1);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < row; ++k) {
        const float real = static_cast<float>(x.value_at(o * row + k) - x_zero) * x_scale;
        const float q = real / y_scale;
        const double rounded = std::isnan(q) ? 0.0 : std::nearbyint(static_cast<double>(q));
        result[static_cast<size_t>(o * y_row + offset + k)] =
            std::clamp(rounded + y_zero, range.low, range.high);
      }
    offset += row;
  }
  if (offset != y_row) fail(node, "inputs do not fill the output " + y.shape().to_string());
  store_integers(node, result, y);
}

void store_accumulator(const Node& node, const Tensor& acc, Tensor& out) {
  std::vector<double> values(acc.data<double>(), acc.data<double>() + acc.size());
  store_integers(node, values, out);
}

// ConvInteger: x, w, x_zero_point, w_zero_point -> the i32 convolution of the shifted operands.
void conv_integer(const Node& node, const Tensors& in, Tensors& out) {
  const Tensor& w = in.at(1);
  const Tensor& w_zero = optional_input(in, 3);
  Tensors operands{shifted(in.at(0), quantization_parameter_values(optional_input(in, 2)), {}),
                   shifted(w, quantization_parameter_values(w_zero),
                           per_entry(node, w, 0, w_zero, "w_zero_point"))};
  Tensors acc{Tensor(ElementType::f64, out.at(0).shape())};
  conv(float_node(node, "Conv"), operands, acc);
  store_accumulator(node, acc[0], out.at(0));
}

// MatMulInteger: A, B, a_zero_point, b_zero_point -> the i32 product of the shifted operands.
void matmul_integer(const Node& node, const Tensors& in, Tensors& out) {
  Tensors acc{Tensor(ElementType::f64, out.at(0).shape())};
  matmul(float_node(node, "MatMul"),
         shifted_matmul_operands(node, in.at(0), optional_input(in, 2), in.at(1),
                                 optional_input(in, 3)),
         acc);
  store_accumulator(node, acc[0], out.at(0));
}

// QLinearLookup: Y[i] = Table[X[i]] (i8 X indexes from -128).
void qlinear_lookup(const Node&, const Tensors& in, Tensors& out) {
  const Tensor x = in.at(0).contiguous();
  const Tensor table = in.at(1).contiguous();
  if (table.size() != 256)
    throw ExecutionError("QLinearLookup: the table has " + std::to_string(table.size()) +
                         " entries, expected 256");
  const int offset = x.element_type() == ElementType::i8 ? 128 : 0;
  const auto* entries = static_cast<const uint8_t*>(table.raw_data());
  const auto* bytes = static_cast<const uint8_t*>(x.raw_data());
  auto* y = static_cast<uint8_t*>(out.at(0).raw_data());
  for (int64_t i = 0; i < x.size(); ++i) {
    const int value = offset ? static_cast<int>(static_cast<int8_t>(bytes[i])) : bytes[i];
    y[i] = entries[value + offset];
  }
}

// QuantizingBatchNormalization: the per-channel affine, the activation and QuantizeLinear's
// steps, in f32 as engine/ops/quantized_post_ops.hpp specifies.
void quantizing_batch_normalization(const Node& node, const Tensors& in, Tensors& out) {
  const Tensor x = in.at(0).contiguous();
  const quantized::ChannelAffine affine = quantized::batch_norm_affine(
      in.at(1), in.at(2), in.at(3), in.at(4), node.attributes.get_float_or("epsilon", 1e-5));
  const float y_scale = static_cast<float>(in.at(5).value_at(0));
  const double y_zero = in.at(6).value_at(0);
  const Range range = range_of(node, in.at(6).element_type());
  const std::string activation = fused::activation(node);
  const auto channels = static_cast<int64_t>(affine.multiplier.size());
  const int64_t inner = x.shape().rank() > 2 ? x.size() / (x.shape()[0] * channels) : 1;
  const float* data = x.data<float>();
  std::vector<double> result(static_cast<size_t>(x.size()));
  for (int64_t i = 0; i < x.size(); ++i) {
    const auto c = static_cast<size_t>((i / inner) % channels);
    const float scaled = data[i] * affine.multiplier[c];
    float y = scaled + affine.offset[c];
    if (!activation.empty()) y = static_cast<float>(apply_fused_activation(node, activation, y));
    const float q = y / y_scale;
    const double rounded = std::isnan(q) ? 0.0 : std::nearbyint(static_cast<double>(q));
    result[static_cast<size_t>(i)] = std::clamp(rounded + y_zero, range.low, range.high);
  }
  store_integers(node, result, out.at(0));
}

}  // namespace

void register_quantization(KernelRegistry& registry) {
  const std::pair<const char*, ReferenceFn> kernels[] = {
      {"QuantizeLinear", &quantize_linear},
      {"DequantizeLinear", &dequantize_linear},
      {"DynamicQuantizeLinear", &dynamic_quantize_linear},
      {"QLinearConv", &qlinear_conv},
      {"QLinearMatMul", &qlinear_matmul},
      {"QLinearAdd", &qlinear_add},
      {"QLinearConcat", &qlinear_concat},
      {"QLinearLookup", &qlinear_lookup},
      {"QuantizingBatchNormalization", &quantizing_batch_normalization},
      {"ConvInteger", &conv_integer},
      {"MatMulInteger", &matmul_integer}};
  for (const auto& [op_type, fn] : kernels)
    registry.add("reference", 0, op_type,
                 [fn = fn](const KernelRequest& r) { return make_reference_kernel(r.node, fn); });
}

}  // namespace troupe::kernels::reference
