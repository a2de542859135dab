#pragma once

#include <functional>

namespace troupe::detail {

/// Sets the calling thread's OpenMP thread count for its lifetime. oneDNN fixes a primitive's
/// thread count when it is created, from the creating thread's count, and runs it with that many
/// threads whatever the executing thread's setting: kernels must be created under the count of the
/// stream that will run them.
/// The calling thread's OpenMP thread count (omp_get_max_threads()).
int current_omp_threads();

/// Runs `work` on a thread of its own, started and joined here, when `threads` > 1 (on the
/// calling thread otherwise), and rethrows what it threw. libgomp keeps the team a thread's
/// parallel regions start for as long as that thread lives, and once the process holds more
/// OpenMP threads than cores it all but stops spinning in every team: each parallel region of a
/// stream then waits for its threads to wake from sleep, about 55 us on a 2-vCPU VM against 2 us.
/// Kernels created (their weights packed) on a long-lived thread of the caller's would leave such
/// a team behind.
void run_on_own_thread(int threads, const std::function<void()>& work);

class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int threads);
  ~ScopedOmpThreads();
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int previous_;
};

}  // namespace troupe::detail
