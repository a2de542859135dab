#pragma once

// `troupe bench`'s report on stdout, printed section by section as the run gets there.

#include <string>
#include <vector>

#include "apps/bench_model.hpp"
#include "apps/bench_op_counters.hpp"
#include "apps/bench_options.hpp"
#include "apps/bench_statistics.hpp"
#include "apps/bench_workload.hpp"

namespace troupe::apps {

/// "[ config ]": the model, its inputs and outputs, and what the run is set up with.
void print_config(const BenchOptions& options, const BenchModel& model, const Workload& workload);

/// "[ first inference ]", flushed, since the measured phase comes next.
void print_first_inference(double ms);

/// "[ results ]" and "[ pipeline stages ]".
void print_results(const RunResults& results, const BenchModel& model);

/// "[ per-op counters ]": one row per node with mean real and CPU time and its share of the total.
void print_op_counters(const std::vector<OpCounter>& ops, const std::string& pc_sort);

}  // namespace troupe::apps
