#include "kernels/omp_threads.hpp"

#include <omp.h>

namespace troupe::detail {

ScopedOmpThreads::ScopedOmpThreads(int threads) : previous_(omp_get_max_threads()) {
  omp_set_num_threads(threads);
}

ScopedOmpThreads::~ScopedOmpThreads() {
  omp_set_num_threads(previous_);
}

}  // namespace troupe::detail
