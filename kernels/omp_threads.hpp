#pragma once

namespace troupe::detail {

/// Sets the calling thread's OpenMP thread count for its lifetime. oneDNN fixes a primitive's
/// thread count when it is created, from the creating thread's count, and runs it with that many
/// threads whatever the executing thread's setting: kernels must be created under the count of the
/// stream that will run them.
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
