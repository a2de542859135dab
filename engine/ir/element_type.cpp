#include "troupe/element_type.hpp"

#include <cstring>

#include "troupe/error.hpp"

namespace troupe {

size_t element_size(ElementType type) {
  switch (type) {
    case ElementType::f32:
    case ElementType::i32:
    case ElementType::u32:
      return 4;
    case ElementType::f64:
    case ElementType::i64:
    case ElementType::u64:
      return 8;
    case ElementType::f16:
    case ElementType::bf16:
    case ElementType::i16:
    case ElementType::u16:
      return 2;
    case ElementType::i8:
    case ElementType::u8:
    case ElementType::boolean:
      return 1;
    case ElementType::string:
      return sizeof(std::string);
    case ElementType::undefined:
      return 0;
  }
  return 0;
}

std::string_view to_string(ElementType type) {
  switch (type) {
    case ElementType::f32:
      return "f32";
    case ElementType::f16:
      return "f16";
    case ElementType::bf16:
      return "bf16";
    case ElementType::f64:
      return "f64";
    case ElementType::i8:
      return "i8";
    case ElementType::u8:
      return "u8";
    case ElementType::i32:
      return "i32";
    case ElementType::i64:
      return "i64";
    case ElementType::i16:
      return "i16";
    case ElementType::u16:
      return "u16";
    case ElementType::u32:
      return "u32";
    case ElementType::u64:
      return "u64";
    case ElementType::boolean:
      return "boolean";
    case ElementType::string:
      return "string";
    case ElementType::undefined:
      return "undefined";
  }
  return "undefined";
}

ElementType element_type_from_string(std::string_view name) {
  struct Alias {
    std::string_view name;
    ElementType type;
  };
  static constexpr Alias aliases[] = {
      {"f32", ElementType::f32},      {"fp32", ElementType::f32},
      {"float32", ElementType::f32},  {"f16", ElementType::f16},
      {"fp16", ElementType::f16},     {"float16", ElementType::f16},
      {"bf16", ElementType::bf16},    {"bfloat16", ElementType::bf16},
      {"f64", ElementType::f64},      {"fp64", ElementType::f64},
      {"float64", ElementType::f64},  {"i8", ElementType::i8},
      {"int8", ElementType::i8},      {"u8", ElementType::u8},
      {"uint8", ElementType::u8},     {"i32", ElementType::i32},
      {"int32", ElementType::i32},    {"i64", ElementType::i64},
      {"int64", ElementType::i64},    {"boolean", ElementType::boolean},
      {"bool", ElementType::boolean}, {"i16", ElementType::i16},
      {"int16", ElementType::i16},    {"u16", ElementType::u16},
      {"uint16", ElementType::u16},   {"u32", ElementType::u32},
      {"uint32", ElementType::u32},   {"u64", ElementType::u64},
      {"uint64", ElementType::u64},   {"string", ElementType::string},
  };
  for (const auto& a : aliases)
    if (a.name == name) return a.type;
  throw InvalidArgument("unknown element type '" + std::string(name) +
                        "' (known: f32 f16 bf16 f64 i8 u8 i16 u16 i32 u32 i64 u64 boolean string)");
}

bool is_floating(ElementType type) {
  return type == ElementType::f32 || type == ElementType::f16 || type == ElementType::bf16 ||
         type == ElementType::f64;
}

bool is_integral(ElementType type) {
  switch (type) {
    case ElementType::i8:
    case ElementType::u8:
    case ElementType::i16:
    case ElementType::u16:
    case ElementType::i32:
    case ElementType::u32:
    case ElementType::i64:
    case ElementType::u64:
      return true;
    default:
      return false;
  }
}

bool is_convertible(ElementType from, ElementType to) {
  if (from == to) return from != ElementType::undefined;
  if (is_floating(from)) return is_floating(to);
  if (is_integral(from)) return is_integral(to) || is_floating(to);
  return false;
}

namespace {
uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

float16::float16(float value) {
  uint32_t x = float_bits(value);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) {  // inf or nan
    bits = static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
    return;
  }
  if (exp >= 31) {  // overflow to inf
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }
  if (exp <= 0) {  // subnormal or zero
    if (exp < -10) {
      bits = static_cast<uint16_t>(sign);
      return;
    }
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    bits = static_cast<uint16_t>(sign | half);
    return;
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exponent: ok
  bits = static_cast<uint16_t>(half);
}

float16::operator float() const {
  uint32_t sign = (bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    // subnormal: value = mant * 2^-24
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

bfloat16::bfloat16(float value) {
  uint32_t x = float_bits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) {  // nan stays nan
    bits = static_cast<uint16_t>((x >> 16) | 0x40u);
    return;
  }
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  bits = static_cast<uint16_t>((x + rounding) >> 16);
}

bfloat16::operator float() const {
  return bits_float(static_cast<uint32_t>(bits) << 16);
}

}  // namespace troupe
