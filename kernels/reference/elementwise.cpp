// Reference kernels of the elementwise ops. Each op is a plain function that states its formula
// once; the loops (broadcasting, type dispatch) are shared helpers at the top of the file.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/reference/broadcast.hpp"
#include "kernels/reference/common.hpp"
#include "kernels/reference/element_types.hpp"
#include "kernels/reference/reference.hpp"
#include "kernels/reference/sigmoid.hpp"
#include "kernels/reference/string_cast.hpp"

namespace troupe::kernels::reference {

namespace {

using Tensors = std::vector<Tensor>;

void require_same_types(const Node& node, const Tensors& in, size_t first, size_t last) {
  for (size_t i = first + 1; i < last; ++i)
    if (in[i].element_type() != in[first].element_type())
      fail(node, "input " + std::to_string(i) + " has element type " +
                     std::string(to_string(in[i].element_type())) + " but input " +
                     std::to_string(first) + " has " +
                     std::string(to_string(in[first].element_type())));
}

std::vector<Shape> shapes_of(const Tensors& in) {
  std::vector<Shape> shapes;
  for (const Tensor& t : in) shapes.push_back(t.shape());
  return shapes;
}

// y = op(a, b) with broadcasting; T is the common input type, R the output element type.
template <class T, class R, class Op>
void broadcast_binary(const Node& node, const Tensors& in, Tensor& out, Op op) {
  const T* a = in[0].data<T>();
  const T* b = in[1].data<T>();
  R* y = out.data<R>();
  BroadcastWalker walk(node, out.shape(), {in[0].shape(), in[1].shape()});
  for (int64_t i = 0; i < out.size(); ++i, walk.next())
    y[i] = store<R>(op(load(a[walk.offset(0)]), load(b[walk.offset(1)])));
}

// Same-typed numeric inputs, output of the same type; op works on compute_t values.
template <class Op>
void arithmetic(const Node& node, const Tensors& in, Tensors& out, Op op) {
  require_same_types(node, in, 0, 2);
  dispatch_numeric(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    broadcast_binary<T, T>(node, in, out[0], op);
  });
}

// Same-typed inputs, boolean output.
template <class Op>
void comparison(const Node& node, const Tensors& in, Tensors& out, bool accepts_boolean, Op op) {
  require_same_types(node, in, 0, 2);
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    broadcast_binary<T, bool>(node, in, out[0], op);
  };
  if (accepts_boolean)
    dispatch_any(node, in[0].element_type(), run);
  else
    dispatch_numeric(node, in[0].element_type(), run);
}

template <class Op>
void logical(const Node& node, const Tensors& in, Tensors& out, Op op) {
  for (size_t i = 0; i < 2; ++i)
    if (in[i].element_type() != ElementType::boolean)
      unsupported_type(node, in[i].element_type(), "boolean", "input " + std::to_string(i));
  broadcast_binary<bool, bool>(node, in, out[0], op);
}

// y = op(x) for the floating types; op works on double.
template <class Op>
void unary_floating(const Node& node, const Tensors& in, Tensors& out, Op op) {
  require_output_size(node, out[0], in[0].size());
  dispatch_floating(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    for (int64_t i = 0; i < in[0].size(); ++i) y[i] = store<T>(op(load(x[i])));
  });
}

// y = op(x) for the numeric types; op works on compute_t values (double or int64).
template <class Op>
void unary_numeric(const Node& node, const Tensors& in, Tensors& out, Op op) {
  require_output_size(node, out[0], in[0].size());
  dispatch_numeric(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    for (int64_t i = 0; i < in[0].size(); ++i) y[i] = store<T>(op(load(x[i])));
  });
}

// Folds any number of same-typed inputs with broadcasting: y = op(...op(op(x0, x1), x2)...).
template <class Op>
void variadic(const Node& node, const Tensors& in, Tensors& out, bool floating_only, Op op,
              bool mean = false) {
  require_same_types(node, in, 0, in.size());
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* y = out[0].data<T>();
    BroadcastWalker walk(node, out[0].shape(), shapes_of(in));
    for (int64_t i = 0; i < out[0].size(); ++i, walk.next()) {
      auto acc = load(in[0].data<T>()[walk.offset(0)]);
      for (size_t k = 1; k < in.size(); ++k) acc = op(acc, load(in[k].data<T>()[walk.offset(k)]));
      if (mean) acc = acc / static_cast<decltype(acc)>(in.size());
      y[i] = store<T>(acc);
    }
  };
  if (floating_only)
    dispatch_floating(node, in[0].element_type(), run);
  else
    dispatch_numeric(node, in[0].element_type(), run);
}

// --- binary arithmetic -------------------------------------------------------------------------

void add(const Node& node, const Tensors& in, Tensors& out) {
  arithmetic(node, in, out, [](auto a, auto b) { return a + b; });
}

void sub(const Node& node, const Tensors& in, Tensors& out) {
  arithmetic(node, in, out, [](auto a, auto b) { return a - b; });
}

void mul(const Node& node, const Tensors& in, Tensors& out) {
  arithmetic(node, in, out, [](auto a, auto b) { return a * b; });
}

void div(const Node& node, const Tensors& in, Tensors& out) {
  // Integer division truncates toward zero (as C++ and ONNX Runtime do).
  arithmetic(node, in, out, [&](auto a, auto b) {
    if constexpr (std::is_integral_v<decltype(b)>)
      if (b == 0) fail(node, "integer division by zero");
    return a / b;
  });
}

void mod(const Node& node, const Tensors& in, Tensors& out) {
  // fmod=0: the remainder takes the divisor's sign (Python's %); fmod=1: the dividend's (C fmod).
  const bool c_style = node.attributes.get_int_or("fmod", 0) != 0;
  arithmetic(node, in, out, [&](auto a, auto b) {
    using C = decltype(a);
    C r;
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) fail(node, "integer modulo by zero");
      r = a % b;
    } else {
      r = std::fmod(a, b);
    }
    if (!c_style && r != 0 && (r < 0) != (b < 0)) r += b;
    return r;
  });
}

void pow(const Node& node, const Tensors& in, Tensors& out) {
  // Base and exponent may differ in type; the result has the base's type.
  dispatch_numeric(node, in[0].element_type(), [&](auto base_tag) {
    using T = typename decltype(base_tag)::type;
    dispatch_numeric(node, in[1].element_type(), [&](auto exponent_tag) {
      using U = typename decltype(exponent_tag)::type;
      const T* x = in[0].data<T>();
      const U* e = in[1].data<U>();
      T* y = out[0].data<T>();
      BroadcastWalker walk(node, out[0].shape(), {in[0].shape(), in[1].shape()});
      for (int64_t i = 0; i < out[0].size(); ++i, walk.next()) {
        const double base = static_cast<double>(load(x[walk.offset(0)]));
        const double exponent = static_cast<double>(load(e[walk.offset(1)]));
        y[i] = store<T>(std::pow(base, exponent));
      }
    });
  });
}

void bit_shift(const Node& node, const Tensors& in, Tensors& out) {
  const bool left = node.attributes.get_string("direction") == "LEFT";
  require_same_types(node, in, 0, 2);
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Computed in uint64 so a left shift drops the bits above T's width on store (as C++ and ONNX
    // Runtime do); a shift by T's width or more yields 0 rather than C++'s undefined behaviour.
    constexpr uint64_t bits = 8 * sizeof(T);
    broadcast_binary<T, T>(node, in, out[0], [&](auto a, auto b) {
      const uint64_t x = static_cast<uint64_t>(a);
      const uint64_t n = static_cast<uint64_t>(b);
      if (n >= bits) return uint64_t{0};
      return left ? x << n : x >> n;
    });
  };
  switch (in[0].element_type()) {
    case ElementType::u8:
      return run(TypeTag<uint8_t>{});
    case ElementType::u16:
      return run(TypeTag<uint16_t>{});
    case ElementType::u32:
      return run(TypeTag<uint32_t>{});
    case ElementType::u64:
      return run(TypeTag<uint64_t>{});
    default:
      unsupported_type(node, in[0].element_type(), "u8, u16, u32 or u64");
  }
}

// --- variadic ----------------------------------------------------------------------------------

void max(const Node& node, const Tensors& in, Tensors& out) {
  variadic(node, in, out, false, [](auto a, auto b) { return max_of(a, b); });
}

void min(const Node& node, const Tensors& in, Tensors& out) {
  variadic(node, in, out, false, [](auto a, auto b) { return min_of(a, b); });
}

void sum(const Node& node, const Tensors& in, Tensors& out) {
  variadic(node, in, out, false, [](auto a, auto b) { return a + b; });
}

void mean(const Node& node, const Tensors& in, Tensors& out) {
  variadic(
      node, in, out, true, [](auto a, auto b) { return a + b; }, /*mean=*/true);
}

// --- comparisons and logic ---------------------------------------------------------------------

void equal(const Node& node, const Tensors& in, Tensors& out) {
  comparison(node, in, out, true, [](auto a, auto b) { return a == b; });
}

void less(const Node& node, const Tensors& in, Tensors& out) {
  comparison(node, in, out, false, [](auto a, auto b) { return a < b; });
}

void less_or_equal(const Node& node, const Tensors& in, Tensors& out) {
  comparison(node, in, out, false, [](auto a, auto b) { return a <= b; });
}

void greater(const Node& node, const Tensors& in, Tensors& out) {
  comparison(node, in, out, false, [](auto a, auto b) { return a > b; });
}

void greater_or_equal(const Node& node, const Tensors& in, Tensors& out) {
  comparison(node, in, out, false, [](auto a, auto b) { return a >= b; });
}

void logical_and(const Node& node, const Tensors& in, Tensors& out) {
  logical(node, in, out, [](bool a, bool b) { return a && b; });
}

void logical_or(const Node& node, const Tensors& in, Tensors& out) {
  logical(node, in, out, [](bool a, bool b) { return a || b; });
}

void logical_xor(const Node& node, const Tensors& in, Tensors& out) {
  logical(node, in, out, [](bool a, bool b) { return a != b; });
}

void logical_not(const Node& node, const Tensors& in, Tensors& out) {
  if (in[0].element_type() != ElementType::boolean)
    unsupported_type(node, in[0].element_type(), "boolean");
  require_output_size(node, out[0], in[0].size());
  const bool* x = in[0].data<bool>();
  bool* y = out[0].data<bool>();
  for (int64_t i = 0; i < in[0].size(); ++i) y[i] = !x[i];
}

// --- unary math on any numeric type ------------------------------------------------------------

void abs(const Node& node, const Tensors& in, Tensors& out) {
  unary_numeric(node, in, out, [](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>)
      return std::fabs(x);
    else
      return x < 0 ? -x : x;
  });
}

void neg(const Node& node, const Tensors& in, Tensors& out) {
  unary_numeric(node, in, out, [](auto x) { return -x; });
}

void sign(const Node& node, const Tensors& in, Tensors& out) {
  unary_numeric(node, in, out, [](auto x) {
    using C = decltype(x);
    // NaN and 0 stay as they are; an unsigned value (u64 computes in uint64) is never negative.
    if constexpr (std::is_unsigned_v<C>)
      return x > 0 ? C{1} : x;
    else
      return x > 0 ? C{1} : (x < 0 ? C{-1} : x);
  });
}

void relu(const Node& node, const Tensors& in, Tensors& out) {
  unary_numeric(node, in, out, [](auto x) { return x < 0 ? decltype(x){0} : x; });
}

// --- unary math on floating types --------------------------------------------------------------

void sqrt(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::sqrt(x); });
}

void exp(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::exp(x); });
}

void log(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::log(x); });
}

void reciprocal(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return 1.0 / x; });
}

void floor(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::floor(x); });
}

void ceil(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::ceil(x); });
}

void round(const Node& node, const Tensors& in, Tensors& out) {
  // Halves round to even; nearbyint uses the default (to-nearest-even) rounding mode.
  unary_floating(node, in, out, [](double x) { return std::nearbyint(x); });
}

void erf(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::erf(x); });
}

void sin(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::sin(x); });
}

void cos(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::cos(x); });
}

void tanh(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::tanh(x); });
}

void sigmoid(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return sigmoid_of(x); });
}

void swish(const Node& node, const Tensors& in, Tensors& out) {
  const double alpha = node.attributes.get_float_or("alpha", 1.0);
  unary_floating(node, in, out, [alpha](double x) { return x * sigmoid_of(alpha * x); });
}

void leaky_relu(const Node& node, const Tensors& in, Tensors& out) {
  const double alpha = node.attributes.get_float_or("alpha", 0.01);
  unary_floating(node, in, out, [alpha](double x) { return x < 0 ? alpha * x : x; });
}

void elu(const Node& node, const Tensors& in, Tensors& out) {
  const double alpha = node.attributes.get_float_or("alpha", 1.0);
  unary_floating(node, in, out,
                 [alpha](double x) { return x < 0 ? alpha * (std::exp(x) - 1.0) : x; });
}

void selu(const Node& node, const Tensors& in, Tensors& out) {
  const double alpha = node.attributes.get_float_or("alpha", 1.67326319217681884765625);
  const double gamma = node.attributes.get_float_or("gamma", 1.05070102214813232421875);
  unary_floating(node, in, out, [alpha, gamma](double x) {
    return x > 0 ? gamma * x : gamma * (alpha * std::exp(x) - alpha);
  });
}

void hard_sigmoid(const Node& node, const Tensors& in, Tensors& out) {
  const double alpha = node.attributes.get_float_or("alpha", 0.2);
  const double beta = node.attributes.get_float_or("beta", 0.5);
  unary_floating(node, in, out, [alpha, beta](double x) {
    return std::max(0.0, std::min(1.0, alpha * x + beta));
  });
}

void hard_swish(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out,
                 [](double x) { return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5)); });
}

void softplus(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return softplus_of(x); });
}

void mish(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return mish_of(x); });
}

void softsign(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return x / (1.0 + std::fabs(x)); });
}

void gelu(const Node& node, const Tensors& in, Tensors& out) {
  const std::string approximate = node.attributes.get_string_or("approximate", "none");
  if (approximate == "tanh") {
    unary_floating(node, in, out, [](double x) {
      const double k = 0.7978845608028654;  // sqrt(2 / pi)
      return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    });
  } else if (approximate == "none") {
    unary_floating(node, in, out,
                   [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); });
  } else {
    fail(node, "attribute 'approximate' is '" + approximate + "', expected 'none' or 'tanh'");
  }
}

void tan(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::tan(x); });
}

void asin(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::asin(x); });
}

void acos(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::acos(x); });
}

void atan(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::atan(x); });
}

void sinh(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::sinh(x); });
}

void cosh(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::cosh(x); });
}

void asinh(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::asinh(x); });
}

void acosh(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::acosh(x); });
}

void atanh(const Node& node, const Tensors& in, Tensors& out) {
  unary_floating(node, in, out, [](double x) { return std::atanh(x); });
}

void thresholded_relu(const Node& node, const Tensors& in, Tensors& out) {
  const double alpha = node.attributes.get_float_or("alpha", 1.0);
  unary_floating(node, in, out, [alpha](double x) { return x > alpha ? x : 0.0; });
}

void celu(const Node& node, const Tensors& in, Tensors& out) {
  const double alpha = node.attributes.get_float_or("alpha", 1.0);
  unary_floating(node, in, out, [alpha](double x) {
    return std::max(0.0, x) + std::min(0.0, alpha * (std::exp(x / alpha) - 1.0));
  });
}

void shrink(const Node& node, const Tensors& in, Tensors& out) {
  const double lambd = node.attributes.get_float_or("lambd", 0.5);
  const double bias = node.attributes.get_float_or("bias", 0.0);
  unary_floating(node, in, out, [lambd, bias](double x) {
    return x < -lambd ? x + bias : (x > lambd ? x - bias : 0.0);
  });
}

// Floating input, boolean output.
template <class Predicate>
void float_predicate(const Node& node, const Tensors& in, Tensors& out, Predicate predicate) {
  require_output_size(node, out[0], in[0].size());
  dispatch_floating(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = in[0].data<T>();
    bool* y = out[0].data<bool>();
    for (int64_t i = 0; i < in[0].size(); ++i) y[i] = predicate(load(x[i]));
  });
}

void is_nan(const Node& node, const Tensors& in, Tensors& out) {
  float_predicate(node, in, out, [](double x) { return std::isnan(x); });
}

void is_inf(const Node& node, const Tensors& in, Tensors& out) {
  const bool negative = node.attributes.get_int_or("detect_negative", 1) != 0;
  const bool positive = node.attributes.get_int_or("detect_positive", 1) != 0;
  float_predicate(node, in, out, [negative, positive](double x) {
    return std::isinf(x) && (x < 0 ? negative : positive);
  });
}

// --- ops with extra operands -------------------------------------------------------------------

void prelu(const Node& node, const Tensors& in, Tensors& out) {
  require_same_types(node, in, 0, 2);
  dispatch_floating(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    broadcast_binary<T, T>(node, in, out[0],
                           [](double x, double slope) { return x < 0 ? slope * x : x; });
  });
}

void clip(const Node& node, const Tensors& in, Tensors& out) {
  dispatch_numeric(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    // A bound is an optional scalar input (opset 11+) or an attribute (earlier opsets).
    auto bound = [&](size_t input, const char* attribute, C fallback) -> C {
      if (input < in.size() && !in[input].empty()) {
        if (in[input].element_type() != in[0].element_type())
          unsupported_type(node, in[input].element_type(),
                           std::string(to_string(in[0].element_type())) + " (the type of X)",
                           std::string("the ") + attribute + " bound");
        if (in[input].size() != 1)
          fail(node, std::string("the ") + attribute + " bound must be a scalar, got shape " +
                         in[input].shape().to_string());
        return load(in[input].data<T>()[0]);
      }
      if (node.attributes.has(attribute))
        return static_cast<C>(node.attributes.get_float(attribute));
      return fallback;
    };
    const C lo = bound(1, "min", std::numeric_limits<C>::lowest());
    const C hi = bound(2, "max", std::numeric_limits<C>::max());
    require_output_size(node, out[0], in[0].size());
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    for (int64_t i = 0; i < in[0].size(); ++i) {
      C v = load(x[i]);
      // In this order, min > max yields max everywhere, as ONNX specifies; NaN passes through.
      if (v < lo) v = lo;
      if (v > hi) v = hi;
      y[i] = store<T>(v);
    }
  });
}

void where(const Node& node, const Tensors& in, Tensors& out) {
  if (in[0].element_type() != ElementType::boolean)
    unsupported_type(node, in[0].element_type(), "boolean", "the condition");
  require_same_types(node, in, 1, 3);
  dispatch_any(node, in[1].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool* cond = in[0].data<bool>();
    const T* x = in[1].data<T>();
    const T* y_in = in[2].data<T>();
    T* y = out[0].data<T>();
    BroadcastWalker walk(node, out[0].shape(), shapes_of(in));
    for (int64_t i = 0; i < out[0].size(); ++i, walk.next())
      y[i] = cond[walk.offset(0)] ? x[walk.offset(1)] : y_in[walk.offset(2)];
  });
}

void cast(const Node& node, const Tensors& in, Tensors& out) {
  if (in[0].element_type() == ElementType::string || out[0].element_type() == ElementType::string)
    return cast_strings(node, in[0], out[0]);
  require_output_size(node, out[0], in[0].size());
  dispatch_any(node, in[0].element_type(), [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    dispatch_any(node, out[0].element_type(), [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      const From* x = in[0].data<From>();
      To* y = out[0].data<To>();
      for (int64_t i = 0; i < in[0].size(); ++i) y[i] = cast_value<To>(x[i]);
    });
  });
}

}  // namespace

void register_elementwise(KernelRegistry& registry) {
  const std::vector<std::pair<const char*, ReferenceFn>> ops = {
      {"Add", &add},
      {"Sub", &sub},
      {"Mul", &mul},
      {"Div", &div},
      {"Mod", &mod},
      {"Pow", &pow},
      {"BitShift", &bit_shift},
      {"Max", &max},
      {"Min", &min},
      {"Sum", &sum},
      {"Mean", &mean},
      {"Equal", &equal},
      {"Less", &less},
      {"LessOrEqual", &less_or_equal},
      {"Greater", &greater},
      {"GreaterOrEqual", &greater_or_equal},
      {"And", &logical_and},
      {"Or", &logical_or},
      {"Xor", &logical_xor},
      {"Not", &logical_not},
      {"Abs", &abs},
      {"Neg", &neg},
      {"Sign", &sign},
      {"Relu", &relu},
      {"Sqrt", &sqrt},
      {"Exp", &exp},
      {"Log", &log},
      {"Reciprocal", &reciprocal},
      {"Floor", &floor},
      {"Ceil", &ceil},
      {"Round", &round},
      {"Erf", &erf},
      {"Sin", &sin},
      {"Cos", &cos},
      {"Tanh", &tanh},
      {"Sigmoid", &sigmoid},
      {"Swish", &swish},
      {"LeakyRelu", &leaky_relu},
      {"Elu", &elu},
      {"Selu", &selu},
      {"HardSigmoid", &hard_sigmoid},
      {"HardSwish", &hard_swish},
      {"Softplus", &softplus},
      {"Mish", &mish},
      {"Softsign", &softsign},
      {"Gelu", &gelu},
      {"Tan", &tan},
      {"Asin", &asin},
      {"Acos", &acos},
      {"Atan", &atan},
      {"Sinh", &sinh},
      {"Cosh", &cosh},
      {"Asinh", &asinh},
      {"Acosh", &acosh},
      {"Atanh", &atanh},
      {"ThresholdedRelu", &thresholded_relu},
      {"Celu", &celu},
      {"Shrink", &shrink},
      {"IsNaN", &is_nan},
      {"IsInf", &is_inf},
      {"PRelu", &prelu},
      {"Clip", &clip},
      {"Where", &where},
      {"Cast", &cast},
      {"CastLike", &cast},  // the output's type is the second input's
  };
  for (const auto& [op_type, fn] : ops) {
    ReferenceFn f = fn;
    registry.add("reference", 0, op_type,
                 [f](const KernelRequest& r) { return make_reference_kernel(r.node, f); });
  }
}

}  // namespace troupe::kernels::reference
