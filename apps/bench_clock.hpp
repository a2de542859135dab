#pragma once

// The clock `troupe bench` times everything with.

#include <chrono>
#include <cstdint>

namespace troupe::apps {

using BenchClock = std::chrono::steady_clock;

/// The current time in nanoseconds.
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(BenchClock::now().time_since_epoch())
      .count();
}

/// Milliseconds from `start` to now.
inline double ms_since(BenchClock::time_point start) {
  return std::chrono::duration<double, std::milli>(BenchClock::now() - start).count();
}

}  // namespace troupe::apps
