#pragma once

// Text of the readers' error messages, so every format names things the same way.

#include <string>

namespace troupe::serialization {

/// A name as the messages show it: 'name'.
inline std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

}  // namespace troupe::serialization
