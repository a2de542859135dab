#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace troupe {

/// Element type of a tensor.
// New types go at the end: the numeric values are stored in compiled blobs.
enum class ElementType : uint8_t {
  undefined,
  f32,
  f16,
  bf16,
  f64,
  i8,
  u8,
  i32,
  i64,
  boolean,
  i16,
  u16,
  u32,
  u64,
  /// Variable-length text (ONNX STRING, KServe BYTES): each element is a std::string. Only ops
  /// that declare string support accept it; a model holding strings runs node by node.
  string
};

/// Size of one element in bytes (0 for undefined; sizeof(std::string) for string).
size_t element_size(ElementType type);

/// Lower-case name as used in errors and reports: "f32", "bf16", "boolean", ...
std::string_view to_string(ElementType type);

/// Parses a name produced by to_string (also accepts "bool", "fp32", "fp16", "float32"); throws
/// InvalidArgument otherwise.
ElementType element_type_from_string(std::string_view name);

/// True for f32, f16, bf16, f64.
bool is_floating(ElementType type);

/// True for i8, u8, i16, u16, i32, u32, i64, u64.
bool is_integral(ElementType type);

/// Whether the preprocess/postprocess stages may convert `from` into `to` without losing the
/// meaning of the data: any type to itself, floating to floating, integral to integral and integral
/// to floating. Floating to integral and anything involving boolean (except boolean to itself) are
/// not.
bool is_convertible(ElementType from, ElementType to);

/// Maps a C++ type to its ElementType.
template <class T>
struct element_type_of;
template <>
struct element_type_of<float> {
  static constexpr ElementType value = ElementType::f32;
};
template <>
struct element_type_of<double> {
  static constexpr ElementType value = ElementType::f64;
};
template <>
struct element_type_of<int8_t> {
  static constexpr ElementType value = ElementType::i8;
};
template <>
struct element_type_of<uint8_t> {
  static constexpr ElementType value = ElementType::u8;
};
template <>
struct element_type_of<int32_t> {
  static constexpr ElementType value = ElementType::i32;
};
template <>
struct element_type_of<int64_t> {
  static constexpr ElementType value = ElementType::i64;
};
template <>
struct element_type_of<int16_t> {
  static constexpr ElementType value = ElementType::i16;
};
template <>
struct element_type_of<uint16_t> {
  static constexpr ElementType value = ElementType::u16;
};
template <>
struct element_type_of<uint32_t> {
  static constexpr ElementType value = ElementType::u32;
};
template <>
struct element_type_of<uint64_t> {
  static constexpr ElementType value = ElementType::u64;
};
template <>
struct element_type_of<bool> {
  static constexpr ElementType value = ElementType::boolean;
};
template <>
struct element_type_of<std::string> {
  static constexpr ElementType value = ElementType::string;
};

/// IEEE half precision stored as bits.
struct float16 {
  uint16_t bits = 0;
  float16() = default;
  explicit float16(float value);
  explicit operator float() const;
};

/// bfloat16 stored as bits (upper half of an f32, round-to-nearest-even on conversion).
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float value);
  explicit operator float() const;
};

template <>
struct element_type_of<float16> {
  static constexpr ElementType value = ElementType::f16;
};
template <>
struct element_type_of<bfloat16> {
  static constexpr ElementType value = ElementType::bf16;
};

}  // namespace troupe
