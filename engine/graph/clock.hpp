#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>

namespace troupe::detail {

/// Monotonic wall clock in nanoseconds; all stage timestamps use it so spans from different
/// threads are comparable.
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// CPU time of the calling thread in nanoseconds.
inline int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace troupe::detail
