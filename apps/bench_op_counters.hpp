#pragma once

// Per-node counters (PERF_COUNT) over every run of `troupe bench`'s measured phase.

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "troupe/compiled_model.hpp"

namespace troupe::apps {

struct OpCounter {
  std::string name, type, precision, implementation;
  size_t runs = 0;
  double real_us = 0, cpu_us = 0;  // sums over the runs

  double mean_real_us() const { return real_us / static_cast<double>(std::max<size_t>(runs, 1)); }
  double mean_cpu_us() const { return cpu_us / static_cast<double>(std::max<size_t>(runs, 1)); }
};

/// The counters of every node of `compiled`'s graph, from the traces its pipeline recorded, in the
/// order `pc_sort` names: "no_sort" execution order, "sort" by mean real time (descending),
/// "simple_sort" sorted without the nodes that took no time.
std::vector<OpCounter> op_counters(const CompiledModel& compiled, const std::string& pc_sort);

}  // namespace troupe::apps
