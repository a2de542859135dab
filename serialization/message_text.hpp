#pragma once

// Text of the readers' error messages, so every format names things the same way.

#include <cstdint>
#include <string>

namespace troupe::serialization {

/// A name as the messages show it: 'name'.
inline std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

/// A byte range of a file as the messages show it: [offset, end).
inline std::string byte_range(uint64_t offset, uint64_t length) {
  return "[" + std::to_string(offset) + ", " + std::to_string(offset + length) + ")";
}

}  // namespace troupe::serialization
