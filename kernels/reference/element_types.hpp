#pragma once

// Element-type plumbing for the reference kernels: dispatch from ElementType to a C++ type,
// and the type each element type computes in.
//
// Floating types compute in double (so f16/bf16/f32 results are rounded once, on store);
// integer types compute in int64 (so i32 arithmetic wraps on store instead of overflowing), except
// u64, which computes in uint64 (int64 cannot hold its upper half, and unsigned arithmetic wraps
// as ONNX expects).

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "troupe/element_type.hpp"
#include "troupe/error.hpp"
#include "troupe/model.hpp"

namespace troupe::kernels::reference {

template <class T>
struct TypeTag {
  using type = T;
};

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

template <class T>
inline constexpr bool is_floating_v = std::is_floating_point_v<T> || is_half_v<T>;

/// The type an element of T is computed in.
template <class T>
using compute_t = std::conditional_t<
    is_floating_v<T>, double,
    std::conditional_t<std::is_same_v<T, bool>, bool,
                       std::conditional_t<std::is_same_v<T, uint64_t>, uint64_t, int64_t>>>;

template <class T>
compute_t<T> load(T value) {
  if constexpr (is_half_v<T>)
    return static_cast<double>(static_cast<float>(value));
  else
    return static_cast<compute_t<T>>(value);
}

template <class T, class V>
T store(V value) {
  if constexpr (is_half_v<T>)
    return T(static_cast<float>(value));
  else if constexpr (std::is_same_v<T, bool>)
    return value != V{};
  else
    return static_cast<T>(value);
}

/// One value converted between element types (ONNX Cast). Floating to integer truncates toward zero
/// and then wraps like an int64 cast (as numpy does); NaN becomes 0. Anything to boolean is "!= 0".
template <class To, class From>
To cast_value(From v) {
  const auto x = load(v);
  if constexpr (std::is_same_v<To, bool>) {
    return x != decltype(x){0};
  } else if constexpr (is_floating_v<To>) {
    return store<To>(static_cast<double>(x));
  } else if constexpr (std::is_floating_point_v<decltype(x)>) {
    if (std::isnan(x)) return To{0};
    const double t = std::trunc(x);
    if constexpr (std::is_same_v<To, uint64_t>) {
      // u64 reaches above int64: take [2^63, 2^64) directly (2^64 and above saturate, like the
      // int64 path) so a large float keeps its value instead of clamping at 2^63 - 1.
      const double two_63 = 9223372036854775808.0;
      if (t >= 2 * two_63) return std::numeric_limits<uint64_t>::max();
      if (t >= two_63) return static_cast<uint64_t>(t);
    }
    const double limit = 9223372036854775807.0;
    const int64_t wide = t >= limit    ? std::numeric_limits<int64_t>::max()
                         : t <= -limit ? std::numeric_limits<int64_t>::min()
                                       : static_cast<int64_t>(t);
    return static_cast<To>(wide);
  } else {
    return static_cast<To>(x);
  }
}

/// Throws ExecutionError "<op> node '<name>': <what> has element type <type>, expected <expected>".
[[noreturn]] inline void unsupported_type(const Node& node, ElementType type,
                                          const std::string& expected,
                                          const std::string& what = "input") {
  throw ExecutionError(node.op_type + " node '" + node.name + "': " + what + " has element type " +
                       std::string(to_string(type)) + ", expected " + expected);
}

/// Calls f(TypeTag<T>{}) for the floating types.
template <class F>
void dispatch_floating(const Node& node, ElementType type, F&& f) {
  switch (type) {
    case ElementType::f32:
      return f(TypeTag<float>{});
    case ElementType::f64:
      return f(TypeTag<double>{});
    case ElementType::f16:
      return f(TypeTag<float16>{});
    case ElementType::bf16:
      return f(TypeTag<bfloat16>{});
    default:
      unsupported_type(node, type, "f32, f64, f16 or bf16");
  }
}

/// Calls f(TypeTag<T>{}) for the floating and integer types.
template <class F>
void dispatch_numeric(const Node& node, ElementType type, F&& f) {
  switch (type) {
    case ElementType::f32:
      return f(TypeTag<float>{});
    case ElementType::f64:
      return f(TypeTag<double>{});
    case ElementType::f16:
      return f(TypeTag<float16>{});
    case ElementType::bf16:
      return f(TypeTag<bfloat16>{});
    case ElementType::i8:
      return f(TypeTag<int8_t>{});
    case ElementType::u8:
      return f(TypeTag<uint8_t>{});
    case ElementType::i32:
      return f(TypeTag<int32_t>{});
    case ElementType::i64:
      return f(TypeTag<int64_t>{});
    case ElementType::i16:
      return f(TypeTag<int16_t>{});
    case ElementType::u16:
      return f(TypeTag<uint16_t>{});
    case ElementType::u32:
      return f(TypeTag<uint32_t>{});
    case ElementType::u64:
      return f(TypeTag<uint64_t>{});
    default:
      unsupported_type(node, type, "a numeric type");
  }
}

/// Calls f(TypeTag<T>{}) for every element type, boolean included.
template <class F>
void dispatch_any(const Node& node, ElementType type, F&& f) {
  if (type == ElementType::boolean) return f(TypeTag<bool>{});
  dispatch_numeric(node, type, std::forward<F>(f));
}

/// Calls f(TypeTag<T>{}) for i32 and i64 (index tensors).
template <class F>
void dispatch_index(const Node& node, ElementType type, F&& f, const std::string& what) {
  switch (type) {
    case ElementType::i32:
      return f(TypeTag<int32_t>{});
    case ElementType::i64:
      return f(TypeTag<int64_t>{});
    default:
      unsupported_type(node, type, "i32 or i64", what);
  }
}

}  // namespace troupe::kernels::reference
