#pragma once

// Little-endian fixed-width fields of troupe's binary headers, independent of the host's byte
// order.

#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe::serialization {

inline void put_le(std::string& out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xffu));
}

inline uint64_t get_le(const unsigned char* p, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = bytes; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

inline uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// The 8 magic bytes as readable text, or as hex when they are not printable.
inline std::string describe_magic(const unsigned char* p, size_t n) {
  bool printable = true;
  for (size_t i = 0; i < n; ++i) printable = printable && p[i] >= 0x20 && p[i] < 0x7f;
  if (printable) return "'" + std::string(reinterpret_cast<const char*>(p), n) + "'";
  static const char* digits = "0123456789abcdef";
  std::string hex = "0x";
  for (size_t i = 0; i < n; ++i) {
    hex.push_back(digits[p[i] >> 4]);
    hex.push_back(digits[p[i] & 15]);
  }
  return hex;
}

}  // namespace troupe::serialization
