// Parallel loops of troupe's own kernels that enter OpenMP only when they split the work.
//
// An `if` clause does not make a region free: libgomp starts a team of one for a region its
// clause keeps to one thread, about 0.34 us per region on these VMs (measured with a 16-element
// loop, 200k regions), while such an op's own work is often less. These helpers run the body on
// the calling thread without entering OpenMP when the work is too small to split.
#pragma once

#include <omp.h>

#include <cstdint>

namespace troupe::kernels::onednn {

/// Runs body() on every thread of the calling thread's OpenMP team when `split`, else once on the
/// calling thread outside any region. The body may hold `#pragma omp for` loops: outside a region
/// they run whole on the calling thread.
template <class Body>
void run_team_if(bool split, const Body& body) {
  if (!split) {
    body();
    return;
  }
#pragma omp parallel
  body();
}

/// Calls body(i) for every i in [0, n): in contiguous shares of the calling thread's OpenMP team
/// (as schedule(static)) when `split`, else in order on the calling thread.
template <class Body>
void for_each_index_if(bool split, int64_t n, const Body& body) {
  if (!split || n <= 1) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) body(i);
}

}  // namespace troupe::kernels::onednn
