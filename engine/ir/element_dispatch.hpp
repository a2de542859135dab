#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "troupe/element_type.hpp"
#include "troupe/error.hpp"

namespace troupe {

template <class T>
struct type_tag {
  using type = T;
};

/// Calls f(type_tag<T>{}) with the C++ type of `type`.
template <class F>
decltype(auto) dispatch_element_type(ElementType type, F&& f) {
  switch (type) {
    case ElementType::f32:
      return f(type_tag<float>{});
    case ElementType::f16:
      return f(type_tag<float16>{});
    case ElementType::bf16:
      return f(type_tag<bfloat16>{});
    case ElementType::f64:
      return f(type_tag<double>{});
    case ElementType::i8:
      return f(type_tag<int8_t>{});
    case ElementType::u8:
      return f(type_tag<uint8_t>{});
    case ElementType::i32:
      return f(type_tag<int32_t>{});
    case ElementType::i64:
      return f(type_tag<int64_t>{});
    case ElementType::i16:
      return f(type_tag<int16_t>{});
    case ElementType::u16:
      return f(type_tag<uint16_t>{});
    case ElementType::u32:
      return f(type_tag<uint32_t>{});
    case ElementType::u64:
      return f(type_tag<uint64_t>{});
    case ElementType::boolean:
      return f(type_tag<bool>{});
    case ElementType::string:
      throw UnsupportedOperation("a numeric operation on a string tensor");
    case ElementType::undefined:
      break;
  }
  throw InvalidArgument("operation on a tensor of undefined element type");
}

template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    return static_cast<double>(static_cast<float>(v));
  else
    return static_cast<double>(v);
}

template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    return T(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>)
    return v != 0.0;
  else
    return static_cast<T>(v);
}

/// Converts one value between element types (saturation is not applied: integral overflow wraps
/// as in C++ casts, which the is_convertible rules keep away from user-visible paths).
template <class D, class S>
D convert_value(S v) {
  if constexpr (std::is_same_v<D, S>)
    return v;
  else if constexpr (std::is_same_v<D, float> && std::is_arithmetic_v<S>)
    return static_cast<float>(v);
  else if constexpr (std::is_integral_v<D> && !std::is_same_v<D, bool> && std::is_integral_v<S>)
    // Directly, not through double: a double cannot hold every i64/u64, and a negative double
    // converted to an unsigned type is undefined.
    return static_cast<D>(v);
  else
    return from_double<D>(to_double(v));
}

}  // namespace troupe
