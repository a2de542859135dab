#include "kernels/reference/string_cast.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "kernels/reference/common.hpp"
#include "kernels/reference/element_types.hpp"

namespace troupe::kernels::reference {

namespace {

// to_chars without a precision gives the shortest digits that round-trip; in scientific form they
// come as d[.ddd]e±XX, which is laid out again below as NumPy lays out its float scalars.
template <class F>
std::string shortest_scientific(F value) {
  char buffer[64];
  const auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  return std::string(buffer, result.ptr);
}

template <class F>
std::string format(F value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  const std::string sci = shortest_scientific(value);
  const size_t e = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exponent = std::atoi(sci.c_str() + e + 1);
  std::string out = negative ? "-" : "";
  // NumPy decides by the value, not by its shortest digits: float32(1e-4) is 9.99999974e-05, so
  // it is written "1e-04".
  const double magnitude_of_value = std::fabs(static_cast<double>(value));
  if (magnitude_of_value < 1e-4 || magnitude_of_value >= 1e16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int magnitude = std::abs(exponent);
    out += exponent < 0 ? "e-" : "e+";
    if (magnitude < 10) out += '0';
    return out + std::to_string(magnitude);
  }
  if (exponent < 0)
    return out + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  const auto whole = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= whole) return out + digits + std::string(whole - digits.size(), '0') + ".0";
  return out + digits.substr(0, whole) + "." + digits.substr(whole);
}

template <class T>
std::string to_text(T value) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, float16> ||
                std::is_same_v<T, bfloat16>)
    return format(static_cast<float>(value));
  else if constexpr (std::is_same_v<T, double>)
    return format(value);
  else if constexpr (std::is_same_v<T, bool>)
    return value ? "1" : "0";
  else
    return std::to_string(value);
}

template <class T>
T from_text(const Node& node, const std::string& text, int64_t index) {
  const auto refuse = [&]() -> T {
    fail(node, "element " + std::to_string(index) + " of input 0 ('" + text.substr(0, 64) +
                   "') is not a " + std::string(to_string(element_type_of<T>::value)));
  };
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    const double value = std::strtod(begin, &end);
    if (end == begin || *end != '\0') return refuse();
    if constexpr (std::is_same_v<T, double>)
      return value;
    else
      return T(static_cast<float>(value));
  } else if constexpr (std::is_same_v<T, bool>) {
    const long long value = std::strtoll(begin, &end, 10);
    if (end == begin || *end != '\0' || errno == ERANGE) return refuse();
    return value != 0;
  } else if constexpr (std::is_signed_v<T>) {
    const long long value = std::strtoll(begin, &end, 10);
    if (end == begin || *end != '\0' || errno == ERANGE || value < std::numeric_limits<T>::min() ||
        value > std::numeric_limits<T>::max())
      return refuse();
    return static_cast<T>(value);
  } else {
    if (text.find('-') != std::string::npos) return refuse();
    const unsigned long long value = std::strtoull(begin, &end, 10);
    if (end == begin || *end != '\0' || errno == ERANGE || value > std::numeric_limits<T>::max())
      return refuse();
    return static_cast<T>(value);
  }
}

}  // namespace

std::string format_floating(double value, bool single) {
  return single ? format(static_cast<float>(value)) : format(value);
}

void cast_strings(const Node& node, const Tensor& in, Tensor& out) {
  require_output_size(node, out, in.size());
  const Tensor x = in.contiguous();
  const ElementType from = x.element_type();
  const ElementType to = out.element_type();
  if (from == ElementType::string && to == ElementType::string) {
    x.copy_to(out);
    return;
  }
  if (to == ElementType::string) {
    std::string* y = out.data<std::string>();
    dispatch_any(node, from, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* values = x.data<T>();
      for (int64_t i = 0; i < x.size(); ++i) y[i] = to_text(values[i]);
    });
    return;
  }
  const std::string* texts = x.data<std::string>();
  dispatch_any(node, to, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* y = out.data<T>();
    for (int64_t i = 0; i < x.size(); ++i) y[i] = from_text<T>(node, texts[i], i);
  });
}

}  // namespace troupe::kernels::reference
