#include "kernels/omp_threads.hpp"

#include <omp.h>

#include <exception>
#include <thread>

namespace troupe::detail {

int current_omp_threads() {
  return omp_get_max_threads();
}

void run_on_own_thread(int threads, const std::function<void()>& work) {
  if (threads <= 1) return work();
  std::exception_ptr error;
  std::thread thread([&] {
    try {
      work();
    } catch (...) {
      error = std::current_exception();
    }
  });
  thread.join();
  if (error) std::rethrow_exception(error);
}

ScopedOmpThreads::ScopedOmpThreads(int threads) : previous_(omp_get_max_threads()) {
  omp_set_num_threads(threads);
}

ScopedOmpThreads::~ScopedOmpThreads() {
  omp_set_num_threads(previous_);
}

}  // namespace troupe::detail
