#pragma once

#include <stdexcept>

namespace troupe::apps {

/// A failure `troupe perf` reports and exits 1 on: no connection, an unknown model, a bad option.
class PerfError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace troupe::apps
