// The int8 kernels of the oneDNN backend (QLinearConv, QLinearMatMul, QuantizeLinear,
// DequantizeLinear) against the reference kernels, the specification, on random shapes,
// parameters, fused post-ops and activation layouts. Both kernels come from the registry for the
// same request. Quantized outputs may differ by one step where the two round a value within an
// ulp of a tie differently (oneDNN multiplies by a folded f32 scale, the reference divides in
// f64); never by more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/ops/op_schema.hpp"
#include "kernels/cpu_isa.hpp"
#include "kernels/kernel_registry.hpp"
#include "layout_test_util.hpp"

// Its own namespace: test_backend_consistency.cpp has a Case, an Rng and *_cases() generators of
// its own for the float kernels, and a unity build compiles the two in one translation unit.
namespace troupe::int8_kernel_consistency {
namespace {

using kernels::Kernel;
using kernels::KernelRegistry;
using kernels::KernelRequest;
using kernels::TensorLayout;
using ints = std::vector<int64_t>;
using test::to_layout;
using test::to_plain;

class Rng {
 public:
  explicit Rng(unsigned seed) : engine_(seed) {}
  int64_t integer(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(engine_);
  }
  double real(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(engine_);
  }
  bool chance(double p) { return real(0, 1) < p; }

  Tensor integers(ElementType type, const ints& dims, int64_t lo, int64_t hi) {
    Tensor t(type, Shape(dims));
    for (int64_t i = 0; i < t.size(); ++i) {
      const int64_t v = integer(lo, hi);
      if (type == ElementType::u8) t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
      if (type == ElementType::i8) t.data<int8_t>()[i] = static_cast<int8_t>(v);
      if (type == ElementType::i32) t.data<int32_t>()[i] = static_cast<int32_t>(v);
    }
    return t;
  }
  Tensor activation(ElementType type, const ints& dims) {
    return type == ElementType::u8 ? integers(type, dims, 0, 255) : integers(type, dims, -128, 127);
  }
  Tensor reals(const ints& dims, double lo, double hi) {
    Tensor t(ElementType::f32, Shape(dims));
    for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = static_cast<float>(real(lo, hi));
    return t;
  }

 private:
  std::mt19937 engine_;
};

Tensor scalar_f32(double v) {
  return Tensor::from_vector<float>(Shape{}, {static_cast<float>(v)});
}

Tensor zero_point(ElementType type, int64_t v) {
  Tensor t(type, Shape{});
  if (type == ElementType::u8) t.data<uint8_t>()[0] = static_cast<uint8_t>(v);
  if (type == ElementType::i8) t.data<int8_t>()[0] = static_cast<int8_t>(v);
  return t;
}

int64_t random_zero_point(Rng& rng, ElementType type) {
  return type == ElementType::u8 ? rng.integer(0, 255) : rng.integer(-128, 127);
}

struct Case {
  Node node;
  std::vector<Tensor> inputs;
  std::vector<bool> constant;
  std::vector<TensorLayout> input_layouts;
  TensorLayout output_layout;
  bool fast = true;  // the kernel must not run oneDNN's reference implementation
};

std::string describe(const Case& c) {
  std::ostringstream s;
  s << c.node.op_type;
  for (const Tensor& t : c.inputs)
    s << " "
      << (t.empty() ? std::string("-")
                    : std::string(to_string(t.element_type())) + t.shape().to_string());
  for (const auto& [name, value] : c.node.attributes.all()) {
    s << " " << name;
    if (auto* str = std::get_if<std::string>(&value)) s << "=" << *str;
    if (auto* i = std::get_if<int64_t>(&value)) s << "=" << *i;
  }
  for (const TensorLayout& l : c.input_layouts) s << (l.channels_last ? " nhwc" : " plain");
  s << (c.output_layout.channels_last ? " -> nhwc" : " -> plain");
  return s.str();
}

// Runs the case on both backends and returns the largest difference (in quantization steps for
// an integer output, absolute for f32).
double run_case(const Case& c, std::string* implementation) {
  std::vector<const Tensor*> constants(c.inputs.size(), nullptr);
  std::vector<ValueInfo> infos;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.constant[i]) constants[i] = &c.inputs[i];
    infos.push_back(
        c.inputs[i].empty()
            ? ValueInfo{}
            : ValueInfo{"x" + std::to_string(i), c.inputs[i].element_type(), c.inputs[i].shape()});
  }
  const OpSchema* schema = OpSchemaRegistry::instance().find(c.node.op_type);
  ShapeInferContext ctx{c.node, infos, constants};
  const std::vector<ValueInfo> outputs = schema->infer(ctx);
  KernelRequest request{c.node, infos, outputs, constants};
  std::unique_ptr<Kernel> reference = KernelRegistry::instance().create_with("reference", request);
  request.input_layouts = c.input_layouts;
  request.output_layouts = {c.output_layout};
  std::unique_ptr<Kernel> fast = KernelRegistry::instance().create_with("dnnl", request);
  if (!fast || !reference) {
    ADD_FAILURE() << (fast ? "no reference kernel" : "the dnnl backend declined the case");
    return INFINITY;
  }
  *implementation = fast->implementation();
  std::vector<Tensor> want{Tensor(outputs[0].type, outputs[0].shape)};
  reference->execute(c.inputs, want);
  std::vector<Tensor> fast_inputs = c.inputs;
  for (size_t i = 0; i < c.input_layouts.size(); ++i)
    if (!fast_inputs[i].empty()) fast_inputs[i] = to_layout(fast_inputs[i], c.input_layouts[i]);
  std::vector<Tensor> got{Tensor(outputs[0].type, outputs[0].shape)};
  // Engine threads run kernels created on the compiling thread.
  std::thread([&] { fast->execute(fast_inputs, got); }).join();
  const Tensor plain = to_plain(got[0], c.output_layout);
  double worst = 0;
  for (int64_t i = 0; i < plain.size(); ++i)
    worst = std::max(worst, std::fabs(plain.value_at(i) - want[0].value_at(i)));
  return worst;
}

Node make_node(const std::string& op_type, Attributes attributes = {}) {
  Node node;
  node.op_type = op_type;
  node.name = op_type + "_under_test";
  node.attributes = std::move(attributes);
  return node;
}

const char* const activations[] = {"", "", "Relu", "Clip", "HardSwish", "LeakyRelu", "Sigmoid"};

void set_activation(Rng& rng, Attributes& attrs) {
  const std::string act = activations[rng.integer(0, 6)];
  if (act.empty()) return;
  attrs.set("fused_activation", act);
  if (act == "Clip") {
    attrs.set("fused_activation_alpha", 0.0);
    attrs.set("fused_activation_beta", 6.0);
  }
  if (act == "LeakyRelu") attrs.set("fused_activation_alpha", 0.1);
}

// QLinearConv: dense, grouped, depthwise and 1x1; strides, padding; per-tensor or per-channel
// weight scales; a bias or none; fused activations and residuals; plain or channels-last.
// Without VNNI the int8 kernels are exact only for u8 activations and 7-bit weights (or depthwise
// convolutions): kernels/int8_exactness.hpp. The cases stay within what is exact on this CPU;
// QuantizedKernels.DeclinesWhatIsNotExact checks the rest goes elsewhere.
bool vnni() {
  return kernels::effective_cpu_isa().vnni;
}

ElementType activation_type(Rng& rng) {
  return !vnni() || rng.chance(0.75) ? ElementType::u8 : ElementType::i8;
}

int64_t weight_limit(bool depthwise) {
  return vnni() || depthwise ? 127 : 64;
}

std::vector<Case> conv_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 64; ++k) {
    const ElementType x_type = activation_type(rng);
    const ElementType y_type = rng.chance(0.75) ? ElementType::u8 : ElementType::i8;
    const int kind = static_cast<int>(rng.integer(0, 3));  // dense, grouped, depthwise, 1x1
    const int64_t group = kind == 1 ? 2 : kind == 2 ? rng.integer(4, 16) : 1;
    // oneDNN's jit int8 kernels take groups of 8 or 16 channels (ResNeXt's, RegNet's) and run
    // other grouped shapes on its reference implementation.
    const int64_t in_per_group = kind == 2   ? 1
                                 : kind == 1 ? 8 * rng.integer(1, 2)
                                             : rng.integer(1, 12);
    const int64_t out_per_group = kind == 2   ? 1
                                  : kind == 1 ? 8 * rng.integer(1, 2)
                                              : rng.integer(1, 12);
    const int64_t size = kind == 3 ? 1 : rng.chance(0.5) ? 3 : 5;
    const int64_t stride = rng.integer(1, 2);
    const int64_t pad = rng.integer(0, size / 2);
    const int64_t out_channels = group * out_per_group;
    const ints x{rng.integer(1, 2), group * in_per_group, rng.integer(size, 12),
                 rng.integer(size, 12)};
    Attributes attrs;
    attrs.set("kernel_shape", ints{size, size});
    attrs.set("strides", ints{stride, stride});
    attrs.set("pads", ints{pad, pad, pad, pad});
    if (group > 1) attrs.set("group", group);
    set_activation(rng, attrs);
    const bool sum = rng.chance(0.3);
    if (sum) attrs.set("fused_sum", int64_t{1});
    const int64_t reduction = in_per_group * size * size;
    // Scales so that the output spreads over its range: the real output's spread is about
    // x_scale * w_scale * 128 * 64 * sqrt(reduction), divided into ~100 steps.
    const double x_scale = rng.real(0.005, 0.05);
    const bool per_channel = rng.chance(0.5);
    Tensor w_scale = per_channel ? rng.reals({out_channels}, 0.002, 0.02) : scalar_f32(0.01);
    Tensor w_zero = per_channel ? Tensor(ElementType::i8, Shape{out_channels})
                                : Tensor(ElementType::i8, Shape{});
    std::fill_n(w_zero.data<int8_t>(), w_zero.size(), int8_t{0});
    const double y_scale = x_scale * 0.01 * 64 * 64 * std::sqrt(double(reduction)) / 100;
    Case c;
    c.node = make_node("QLinearConv", attrs);
    c.inputs = {
        rng.activation(x_type, x),
        scalar_f32(x_scale),
        zero_point(x_type, random_zero_point(rng, x_type)),
        rng.integers(ElementType::i8, {out_channels, in_per_group, size, size},
                     weight_limit(kind == 2) == 127 ? -128 : -64, weight_limit(kind == 2)),
        w_scale,
        w_zero,
        scalar_f32(y_scale),
        zero_point(y_type, random_zero_point(rng, y_type) / 2),
        rng.chance(0.7) ? rng.integers(ElementType::i32, {out_channels}, -5000, 5000) : Tensor()};
    const ints y_dims{x[0], out_channels, (x[2] + 2 * pad - size) / stride + 1,
                      (x[3] + 2 * pad - size) / stride + 1};
    if (sum) {
      c.inputs.push_back(rng.activation(y_type, y_dims));
      c.inputs.push_back(scalar_f32(y_scale * rng.real(0.5, 2.0)));
      c.inputs.push_back(zero_point(y_type, random_zero_point(rng, y_type) / 2));
    }
    c.constant.assign(c.inputs.size(), true);
    c.constant[0] = false;
    if (sum) c.constant[9] = false;
    const bool channels_last = rng.chance(0.6);
    const TensorLayout layout =
        channels_last ? TensorLayout::channels_last_order() : TensorLayout{};
    c.input_layouts.assign(c.inputs.size(), TensorLayout{});
    c.input_layouts[0] = layout;
    if (sum) c.input_layouts[9] = layout;
    c.output_layout = layout;
    cases.push_back(std::move(c));
  }
  return cases;
}

// QLinearMatMul with a constant B: 2-D and 3-D A, per-tensor or per-column scales, a fused i32
// bias, fused activations.
std::vector<Case> matmul_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 32; ++k) {
    const ElementType a_type = activation_type(rng);
    const ElementType y_type = rng.chance(0.75) ? ElementType::u8 : ElementType::i8;
    const int64_t m = rng.integer(1, 9);
    const int64_t kk = rng.integer(1, 80);
    const int64_t n = rng.integer(1, 40);
    ints a{m, kk};
    if (rng.chance(0.3)) a.insert(a.begin(), rng.integer(2, 3));
    Attributes attrs;
    set_activation(rng, attrs);
    const bool bias = rng.chance(0.6);
    if (bias) attrs.set("fused_bias", int64_t{1});
    const double a_scale = rng.real(0.005, 0.05);
    const bool per_column = rng.chance(0.5);
    Tensor b_scale = per_column ? rng.reals({n}, 0.002, 0.02) : scalar_f32(0.01);
    Tensor b_zero =
        per_column ? Tensor(ElementType::i8, Shape{n}) : Tensor(ElementType::i8, Shape{});
    std::fill_n(b_zero.data<int8_t>(), b_zero.size(), int8_t{0});
    Case c;
    c.node = make_node("QLinearMatMul", attrs);
    c.inputs = {rng.activation(a_type, a),
                scalar_f32(a_scale),
                zero_point(a_type, random_zero_point(rng, a_type)),
                rng.integers(ElementType::i8, {kk, n}, -weight_limit(false), weight_limit(false)),
                b_scale,
                b_zero,
                scalar_f32(a_scale * 0.01 * 64 * 64 * std::sqrt(double(kk)) / 100),
                zero_point(y_type, random_zero_point(rng, y_type) / 2)};
    if (bias) c.inputs.push_back(rng.integers(ElementType::i32, {n}, -5000, 5000));
    c.constant.assign(c.inputs.size(), true);
    c.constant[0] = false;
    cases.push_back(std::move(c));
  }
  return cases;
}

// The same products into f32 ("fused_float_output": y_scale and y_zero_point omitted), as the QDQ
// fusion writes a quantized layer no QuantizeLinear reads.
std::vector<Case> float_output_matmul_cases(Rng& rng) {
  std::vector<Case> cases = matmul_cases(rng);
  for (Case& c : cases) {
    c.node.attributes.set("fused_float_output", int64_t{1});
    c.inputs[6] = Tensor();
    c.inputs[7] = Tensor();
    c.constant[6] = c.constant[7] = false;
  }
  return cases;
}

// QuantizeLinear and DequantizeLinear, per-tensor parameters, plain and channels-last.
std::vector<Case> linear_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 32; ++k) {
    const ElementType q_type = rng.chance(0.5) ? ElementType::u8 : ElementType::i8;
    // The float side blocked (as AVX-512's float convolutions keep activations) in a quarter of
    // the cases, quantizing and dequantizing: whole blocks of 16 channels, as the graph compiler
    // assigns that layout.
    const bool blocked = k % 8 == 1 || k % 8 == 2;
    const ints dims =
        blocked || rng.chance(0.7)
            ? ints{rng.integer(1, 2), blocked ? 16 * rng.integer(1, 2) : rng.integer(1, 20),
                   rng.integer(1, 9), rng.integer(1, 9)}
            : ints{rng.integer(1, 50)};
    const double scale = rng.real(0.01, 0.1);
    Case c;
    const bool quantize = k % 2 == 0;
    c.node = make_node(quantize ? "QuantizeLinear" : "DequantizeLinear");
    c.inputs = {quantize ? rng.reals(dims, -20.0, 20.0) : rng.activation(q_type, dims),
                scalar_f32(scale), zero_point(q_type, random_zero_point(rng, q_type))};
    c.constant = {false, true, true};
    // The integer side channels-last, the float side plain or blocked (a conversion) or
    // channels-last too.
    const bool channels_last = blocked || (dims.size() == 4 && rng.chance(0.5));
    const bool both = !blocked && channels_last && rng.chance(0.5);
    const TensorLayout layout =
        channels_last ? TensorLayout::channels_last_order() : TensorLayout{};
    const TensorLayout float_side = blocked ? TensorLayout::blocked(16)
                                    : both  ? layout
                                            : TensorLayout{};
    c.input_layouts = {quantize ? float_side : layout, {}, {}};
    c.output_layout = quantize ? layout : float_side;
    cases.push_back(std::move(c));
  }
  return cases;
}

bool same_layouts(const Case& c) {
  return c.input_layouts[0] == c.output_layout;
}

// QuantizingBatchNormalization of f32 tensors, Relu or none, into u8 or i8, plain or
// channels-last (input and output stored alike or not), with channel counts below and above the
// 16-lane vectors.
std::vector<Case> quantizing_batch_norm_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 32; ++k) {
    const ElementType y_type = rng.chance(0.75) ? ElementType::u8 : ElementType::i8;
    // Every fourth case reads 16-channel blocks into channels-last (a quantized DenseNet's joins).
    const bool blocked = k % 4 == 3;
    const int64_t channels = blocked ? 16 * rng.integer(1, 3) : rng.integer(1, 70);
    const ints dims = blocked || rng.chance(0.75)
                          ? ints{rng.integer(1, 2), channels, rng.integer(1, 9), rng.integer(1, 9)}
                          : ints{rng.integer(1, 3), channels};
    Attributes attrs;
    if (rng.chance(0.5)) attrs.set("fused_activation", std::string("Relu"));
    if (rng.chance(0.5)) attrs.set("epsilon", rng.real(1e-6, 1e-2));
    Case c;
    c.node = make_node("QuantizingBatchNormalization", attrs);
    c.inputs = {rng.reals(dims, -4.0, 4.0),
                rng.reals({channels}, -2.0, 2.0),
                rng.reals({channels}, -1.0, 1.0),
                rng.reals({channels}, -0.5, 0.5),
                rng.reals({channels}, 0.05, 3.0),
                scalar_f32(rng.real(0.005, 0.05)),
                zero_point(y_type, random_zero_point(rng, y_type))};
    c.constant = {false, true, true, true, true, true, true};
    auto layout = [&] {
      return dims.size() == 4 && rng.chance(0.5) ? TensorLayout::channels_last_order()
                                                 : TensorLayout{};
    };
    c.input_layouts.assign(7, TensorLayout{});
    c.input_layouts[0] = blocked ? TensorLayout::blocked(16) : layout();
    c.output_layout = blocked ? TensorLayout::channels_last_order() : layout();
    cases.push_back(std::move(c));
  }
  return cases;
}

// QLinearAdd of same-shape tensors, Relu or none, plain or channels-last (the two operands may be
// stored differently).
std::vector<Case> add_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 24; ++k) {
    const ElementType a_type = rng.chance(0.75) ? ElementType::u8 : ElementType::i8;
    const ElementType b_type = rng.chance(0.75) ? ElementType::u8 : ElementType::i8;
    const ElementType c_type = rng.chance(0.75) ? ElementType::u8 : ElementType::i8;
    const ints dims = rng.chance(0.7) ? ints{rng.integer(1, 2), rng.integer(1, 20),
                                             rng.integer(1, 9), rng.integer(1, 9)}
                                      : ints{rng.integer(1, 50)};
    Attributes attrs;
    if (rng.chance(0.5)) attrs.set("fused_activation", std::string("Relu"));
    Case c;
    c.node = make_node("QLinearAdd", attrs);
    c.inputs = {rng.activation(a_type, dims),
                scalar_f32(rng.real(0.01, 0.1)),
                zero_point(a_type, random_zero_point(rng, a_type)),
                rng.activation(b_type, dims),
                scalar_f32(rng.real(0.01, 0.1)),
                zero_point(b_type, random_zero_point(rng, b_type)),
                scalar_f32(rng.real(0.02, 0.2)),
                zero_point(c_type, random_zero_point(rng, c_type))};
    c.constant = {false, true, true, false, true, true, true, true};
    auto layout = [&] {
      return dims.size() == 4 && rng.chance(0.5) ? TensorLayout::channels_last_order()
                                                 : TensorLayout{};
    };
    c.input_layouts.assign(8, TensorLayout{});
    c.input_layouts[0] = layout();
    c.input_layouts[3] = layout();
    c.output_layout = layout();
    cases.push_back(std::move(c));
  }
  return cases;
}

// QLinearConcat of 2 to 4 inputs, some with the output's parameters (copied), along any axis of
// plain tensors or the channels of channels-last ones (inputs may be stored differently).
std::vector<Case> concat_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 24; ++k) {
    const ElementType y_type = rng.chance(0.75) ? ElementType::u8 : ElementType::i8;
    const bool image = rng.chance(0.7);
    ints dims = image ? ints{rng.integer(1, 2), 0, rng.integer(1, 7), rng.integer(1, 7)}
                      : ints{rng.integer(1, 3), rng.integer(1, 5), rng.integer(1, 5)};
    const int64_t axis = image ? 1 : rng.integer(0, 2);
    const double y_scale = rng.real(0.02, 0.2);
    const int64_t y_zero = random_zero_point(rng, y_type);
    Attributes attrs;
    attrs.set("axis", rng.chance(0.5) ? axis : axis - static_cast<int64_t>(dims.size()));
    Case c;
    c.node = make_node("QLinearConcat", attrs);
    c.inputs = {scalar_f32(y_scale), zero_point(y_type, y_zero)};
    c.constant = {true, true};
    c.input_layouts = {TensorLayout{}, TensorLayout{}};
    const bool channels_last = image && rng.chance(0.6);
    const int inputs = static_cast<int>(rng.integer(2, 4));
    for (int i = 0; i < inputs; ++i) {
      ints x = dims;
      x[static_cast<size_t>(axis)] = rng.integer(1, 40);  // channels-last rows of 16+ lanes too
      const bool same = rng.chance(0.4);
      const ElementType x_type = same               ? y_type
                                 : rng.chance(0.75) ? ElementType::u8
                                                    : ElementType::i8;
      c.inputs.push_back(rng.activation(x_type, x));
      c.inputs.push_back(scalar_f32(same ? y_scale : rng.real(0.01, 0.3)));
      c.inputs.push_back(zero_point(x_type, same ? y_zero : random_zero_point(rng, x_type)));
      c.constant.insert(c.constant.end(), {false, true, true});
      c.input_layouts.push_back(
          channels_last && rng.chance(0.8) ? TensorLayout::channels_last_order() : TensorLayout{});
      c.input_layouts.insert(c.input_layouts.end(), {TensorLayout{}, TensorLayout{}});
    }
    c.output_layout = channels_last ? TensorLayout::channels_last_order() : TensorLayout{};
    cases.push_back(std::move(c));
  }
  return cases;
}

// Transpose of u8/i8 tensors (a quantized ShuffleNet's channel shuffle runs on the integers):
// the reorder and the row-copy paths.
std::vector<Case> transpose_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 16; ++k) {
    const ElementType type = rng.chance(0.5) ? ElementType::u8 : ElementType::i8;
    const size_t rank = static_cast<size_t>(rng.integer(2, 5));
    ints dims(rank);
    for (auto& d : dims) d = rng.integer(1, 6);
    if (k % 2 == 0) dims.back() = rng.integer(16, 40);  // rows long enough to copy whole
    std::vector<int64_t> perm(rank);
    for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(static_cast<unsigned>(k)));
    if (k % 2 == 0 && perm.back() != static_cast<int64_t>(rank - 1))
      std::swap(
          perm[static_cast<size_t>(std::find(perm.begin(), perm.end(), rank - 1) - perm.begin())],
          perm.back());
    Attributes attrs;
    attrs.set("perm", perm);
    Case c;
    c.node = make_node("Transpose", attrs);
    c.inputs = {rng.activation(type, dims)};
    c.constant = {false};
    c.input_layouts = {TensorLayout{}};
    cases.push_back(std::move(c));
  }
  return cases;
}

// QLinearLookup: u8/i8 in and out, any table, plain or channels-last.
std::vector<Case> lookup_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 16; ++k) {
    const ElementType in = k % 2 == 0 ? ElementType::u8 : ElementType::i8;
    const ElementType out = k % 4 < 2 ? ElementType::u8 : ElementType::i8;
    const ints dims = {rng.integer(1, 2), rng.integer(1, 70), rng.integer(1, 9), rng.integer(1, 9)};
    Case c;
    c.node = make_node("QLinearLookup", Attributes{});
    c.inputs = {rng.activation(in, dims), rng.activation(out, {256})};
    c.constant = {false, true};
    const TensorLayout layout = k >= 8 ? TensorLayout::channels_last_order() : TensorLayout{};
    c.input_layouts = {layout, TensorLayout{}};
    c.output_layout = layout;
    cases.push_back(std::move(c));
  }
  return cases;
}

unsigned seed() {
  const char* env = std::getenv("TROUPE_SEED");
  return env ? static_cast<unsigned>(std::strtoul(env, nullptr, 10)) : 20261125u;
}

// Integer outputs: at most one step apart (a rounding tie), and in nearly every element equal.
void check_family(const std::vector<Case>& cases, double tolerance) {
  for (const Case& c : cases) {
    SCOPED_TRACE(describe(c));
    std::string implementation;
    const double worst = run_case(c, &implementation);
    EXPECT_LE(worst, tolerance) << implementation;
    if (c.fast) {
      // oneDNN's reference implementations: `ref:any`, `ref_int8:any`, `bnorm_ref:any`, ...
      EXPECT_FALSE(implementation.rfind("dnnl:ref", 0) == 0 ||
                   implementation.find("_ref:") != std::string::npos)
          << implementation;
    }
  }
}

TEST(QuantizedKernels, QLinearConvMatchesTheReference) {
  Rng rng(seed());
  check_family(conv_cases(rng), 1.0);
}

TEST(QuantizedKernels, QLinearMatMulMatchesTheReference) {
  Rng rng(seed() + 1);
  check_family(matmul_cases(rng), 1.0);
}

// Integer accumulation is exact on both; the f32 output differs by the float rounding of the
// folded scales (outputs reach a few thousand).
TEST(QuantizedKernels, QLinearMatMulIntoF32MatchesTheReference) {
  Rng rng(seed() + 10);
  check_family(float_output_matmul_cases(rng), 1e-2);
}

TEST(QuantizedKernels, QuantizeAndDequantizeMatchTheReference) {
  Rng rng(seed() + 2);
  // Dequantized f32: (x - zp) * scale computed the same way up to float rounding.
  check_family(linear_cases(rng), 1.0);
}

// AVX-512 runs the reference's own steps (a loop, not oneDNN's reorder with a zero point) in the
// integer side's layout, and a layout conversion only moves f32 values: bit for bit, whether or
// not the layout changes.
TEST(QuantizedKernels, QuantizeAndDequantizeAreTheReferenceBitForBitOnAvx512) {
  Rng rng(seed() + 9);
  std::vector<Case> cases = linear_cases(rng);
  const auto converting =
      std::count_if(cases.begin(), cases.end(), [](const Case& c) { return !same_layouts(c); });
  ASSERT_GE(converting, 4);
  ASSERT_GE(cases.size() - static_cast<size_t>(converting), 4u);
  check_family(cases, kernels::effective_cpu_isa().avx512 ? 0.0 : 1.0);
}

// A plain float tensor quantized into channels-last (a model's image input): with AVX-512 and 3
// channels a loop of the reference's own steps, 16 pixels at a time and the rest one by one;
// other channel counts a reorder into channels-last, then the loop: bit for bit. Elsewhere
// oneDNN's reorder (at most a step apart at a tie).
TEST(QuantizedKernels, QuantizeIntoChannelsLastIsTheReferenceBitForBitOnAvx512) {
  Rng rng(seed() + 11);
  std::vector<Case> cases;
  for (int k = 0; k < 16; ++k) {
    const ElementType q_type = rng.chance(0.5) ? ElementType::u8 : ElementType::i8;
    // 3 channels (an image) or any count; from 1 pixel to several vectors of 16 and a tail.
    const int64_t channels = rng.chance(0.5) ? 3 : rng.integer(1, 40);
    const ints dims =
        k % 4 == 3 ? ints{rng.integer(1, 2), channels, rng.integer(1, 40)}
                   : ints{rng.integer(1, 2), channels, rng.integer(1, 24), rng.integer(1, 24)};
    Case c;
    c.node = make_node("QuantizeLinear");
    c.inputs = {rng.reals(dims, -20.0, 20.0), scalar_f32(rng.real(0.01, 0.1)),
                zero_point(q_type, random_zero_point(rng, q_type))};
    c.constant = {false, true, true};
    c.input_layouts = {TensorLayout{}, {}, {}};
    c.output_layout = TensorLayout::channels_last_order();
    cases.push_back(std::move(c));
  }
  for (const Case& c : cases) {
    check_family({c}, kernels::effective_cpu_isa().avx512 ? 0.0 : 1.0);
  }
}

TEST(QuantizedKernels, QLinearAddIsTheChainBitForBit) {
  Rng rng(seed() + 4);
  check_family(add_cases(rng), 0.0);
}

TEST(QuantizedKernels, QuantizingBatchNormalizationIsTheReferenceBitForBit) {
  Rng rng(seed() + 8);
  check_family(quantizing_batch_norm_cases(rng), 0.0);
}

// One run of a kernel compiled for open sizes: its inputs, with their sizes, and the output's.
struct ConcreteRun {
  std::vector<Tensor> inputs;
  Shape output;
};

// Creates the dnnl kernel once for `open_inputs` and `open_output` (sizes open: a model compiled
// with a dynamic batch) and runs each of `runs` on that one instance, bit for bit against the
// reference kernel made for the run's own sizes.
void expect_open_shapes_match_reference(const Node& node, const std::vector<ValueInfo>& open_inputs,
                                        const ValueInfo& open_output,
                                        const std::vector<const Tensor*>& constants,
                                        const std::vector<ConcreteRun>& runs) {
  KernelRequest request{node, open_inputs, {open_output}, constants};
  std::unique_ptr<Kernel> fast = KernelRegistry::instance().create_with("dnnl", request);
  ASSERT_TRUE(fast) << "the dnnl backend declined open shapes";
  for (const ConcreteRun& run : runs) {
    std::vector<ValueInfo> infos = open_inputs;
    std::string sizes;
    for (size_t i = 0; i < infos.size(); ++i)
      if (!run.inputs[i].empty() && !constants[i]) {
        infos[i].shape = run.inputs[i].shape();
        sizes += infos[i].shape.to_string() + " ";
      }
    SCOPED_TRACE(sizes + "-> " + run.output.to_string());
    KernelRequest plain{node, infos, {ValueInfo{"y", open_output.type, run.output}}, constants};
    std::unique_ptr<Kernel> reference = KernelRegistry::instance().create_with("reference", plain);
    std::vector<Tensor> want{Tensor(open_output.type, run.output)};
    std::vector<Tensor> got{Tensor(open_output.type, run.output)};
    reference->execute(run.inputs, want);
    fast->execute(run.inputs, got);
    for (int64_t i = 0; i < want[0].size(); ++i)
      ASSERT_EQ(got[0].value_at(i), want[0].value_at(i)) << "element " << i;
  }
}

// A case's inputs as value infos, and pointers to those that are constant.
std::vector<ValueInfo> infos_of(const Case& c) {
  std::vector<ValueInfo> infos;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    infos.push_back({"x" + std::to_string(i), c.inputs[i].element_type(), c.inputs[i].shape()});
  return infos;
}
std::vector<const Tensor*> constants_of(const Case& c) {
  std::vector<const Tensor*> constants(c.inputs.size(), nullptr);
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (c.constant[i] && !c.inputs[i].empty()) constants[i] = &c.inputs[i];
  return constants;
}

// A model compiled with its batch and image sizes open keeps the fast kernel: one instance runs
// inputs of different sizes, each bit for bit the reference.
TEST(QuantizedKernels, QuantizingBatchNormalizationRunsShapesKnownOnlyAtRunTime) {
  Rng rng(seed() + 11);
  const Case c = quantizing_batch_norm_cases(rng).front();
  const int64_t channels = c.inputs[1].size();
  std::vector<ValueInfo> infos = infos_of(c);
  infos[0].shape = Shape{Shape::dynamic, channels, Shape::dynamic, Shape::dynamic};
  std::vector<ConcreteRun> runs;
  for (const ints& dims : {ints{1, channels, 3, 5}, ints{2, channels, 7, 2}}) {
    ConcreteRun run{c.inputs, Shape(dims)};
    run.inputs[0] = rng.reals(dims, -4.0, 4.0);
    runs.push_back(std::move(run));
  }
  expect_open_shapes_match_reference(
      c.node, infos, {"y", c.inputs[6].element_type(), infos[0].shape}, constants_of(c), runs);
}

// Operands of the same open shape ([?, 8, ?]) keep the fast kernel: equal sizes at run time run
// its loop, sizes that turn out to broadcast the reference kernel; both as the reference.
TEST(QuantizedKernels, QLinearAddRunsShapesKnownOnlyAtRunTime) {
  Rng rng(seed() + 12);
  Case c = add_cases(rng).front();
  c.node.attributes = {};
  const Shape open{Shape::dynamic, 8, Shape::dynamic};
  std::vector<ValueInfo> infos = infos_of(c);
  infos[0].shape = open;
  infos[3].shape = open;
  std::vector<ConcreteRun> runs;
  for (const auto& [a_dims, b_dims] : std::vector<std::pair<ints, ints>>{
           {{2, 8, 37}, {2, 8, 37}}, {{3, 8, 5}, {1, 8, 5}}, {{1, 8, 1}, {4, 8, 6}}}) {
    ConcreteRun run{c.inputs,
                    Shape{std::max(a_dims[0], b_dims[0]), 8, std::max(a_dims[2], b_dims[2])}};
    run.inputs[0] = rng.activation(c.inputs[0].element_type(), a_dims);
    run.inputs[3] = rng.activation(c.inputs[3].element_type(), b_dims);
    runs.push_back(std::move(run));
  }
  expect_open_shapes_match_reference(c.node, infos, {"y", c.inputs[7].element_type(), open},
                                     constants_of(c), runs);
}

// QLinearConcat of inputs whose batch and widths are open ([?, c_k, ?]): one instance runs two
// sets of sizes, each bit for bit the reference.
TEST(QuantizedKernels, QLinearConcatRunsShapesKnownOnlyAtRunTime) {
  Rng rng(seed() + 13);
  const ints channels{3, 20, 5};
  Attributes attrs;
  attrs.set("axis", int64_t{1});
  Case c;
  c.node = make_node("QLinearConcat", attrs);
  c.inputs = {scalar_f32(0.05), zero_point(ElementType::u8, 7)};
  for (size_t k = 0; k < channels.size(); ++k) {
    c.inputs.push_back(Tensor(ElementType::u8, Shape{1, channels[k], 1}));
    c.inputs.push_back(scalar_f32(k == 1 ? 0.05 : rng.real(0.01, 0.1)));  // input 1 is copied
    c.inputs.push_back(zero_point(ElementType::u8, k == 1 ? 7 : rng.integer(0, 255)));
  }
  c.constant.assign(c.inputs.size(), true);
  std::vector<ValueInfo> infos = infos_of(c);
  for (size_t k = 0; k < channels.size(); ++k) {
    c.constant[2 + 3 * k] = false;
    infos[2 + 3 * k].shape = Shape{Shape::dynamic, channels[k], Shape::dynamic};
  }
  std::vector<ConcreteRun> runs;
  for (const auto& [batch, width] : std::vector<std::pair<int64_t, int64_t>>{{1, 40}, {3, 9}}) {
    ConcreteRun run{c.inputs, Shape{batch, 28, width}};
    for (size_t k = 0; k < channels.size(); ++k)
      run.inputs[2 + 3 * k] = rng.activation(ElementType::u8, {batch, channels[k], width});
    runs.push_back(std::move(run));
  }
  expect_open_shapes_match_reference(
      c.node, infos, {"y", ElementType::u8, Shape{Shape::dynamic, 28, Shape::dynamic}},
      constants_of(c), runs);
}

TEST(QuantizedKernels, QLinearConcatIsTheChainBitForBit) {
  Rng rng(seed() + 5);
  check_family(concat_cases(rng), 0.0);
}

TEST(QuantizedKernels, QLinearLookupMatchesTheReference) {
  Rng rng(seed() + 7);
  check_family(lookup_cases(rng), 0.0);
}

TEST(QuantizedKernels, TransposeOfIntegersMatchesTheReference) {
  Rng rng(seed() + 6);
  check_family(transpose_cases(rng), 0.0);
}

// Without VNNI, an i8 activation or a weight beyond 7 bits would not compute exactly (a
// saturating 16-bit pair, or halved weights): the dnnl backend declines them and the reference
// kernel runs them (the graph compiler leaves such layers in their float form instead).
TEST(QuantizedKernels, DeclinesWhatIsNotExactWithoutVnni) {
  if (vnni()) GTEST_SKIP() << "this CPU has VNNI: every int8 product is exact";
  Rng rng(seed() + 3);
  std::vector<Case> cases = conv_cases(rng);
  std::vector<Case> matmuls = matmul_cases(rng);
  cases.insert(cases.end(), matmuls.begin(), matmuls.end());
  int declined = 0;
  for (Case& c : cases) {
    const bool depthwise = c.node.op_type == "QLinearConv" && c.inputs[3].shape()[1] == 1 &&
                           c.node.attributes.get_int_or("group", 1) == c.inputs[3].shape()[0];
    if (depthwise) continue;
    // A weight of 65..127 somewhere, or s8 activations.
    if (declined % 2 == 0) {
      c.inputs[3].data<int8_t>()[0] = 100;
    } else {
      Tensor signed_x(ElementType::i8, c.inputs[0].shape());
      std::fill_n(signed_x.data<int8_t>(), signed_x.size(), int8_t{-3});
      c.inputs[0] = signed_x;
      c.inputs[2] = zero_point(ElementType::i8, 0);
    }
    std::vector<const Tensor*> constants(c.inputs.size(), nullptr);
    std::vector<ValueInfo> infos;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (c.constant[i]) constants[i] = &c.inputs[i];
      infos.push_back(c.inputs[i].empty()
                          ? ValueInfo{}
                          : ValueInfo{"x", c.inputs[i].element_type(), c.inputs[i].shape()});
    }
    ShapeInferContext ctx{c.node, infos, constants};
    const std::vector<ValueInfo> outputs =
        OpSchemaRegistry::instance().find(c.node.op_type)->infer(ctx);
    KernelRequest request{c.node, infos, outputs, constants};
    EXPECT_EQ(KernelRegistry::instance().create_with("dnnl", request), nullptr) << describe(c);
    EXPECT_NE(KernelRegistry::instance().create_with("reference", request), nullptr);
    ++declined;
  }
  EXPECT_GT(declined, 40);
}

}  // namespace
}  // namespace troupe::int8_kernel_consistency
