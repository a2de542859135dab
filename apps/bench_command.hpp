#pragma once

// `troupe bench`: runs a model with several requests in flight and reports throughput, latency
// and what each pipeline stage did.

#include "apps/bench_options.hpp"

namespace troupe::apps {

/// Runs the benchmark; returns the process exit code. Errors go to stderr.
int run_bench(const BenchOptions& options);

}  // namespace troupe::apps
