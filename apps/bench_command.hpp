#pragma once

// `troupe bench`: runs a model with several requests in flight and reports throughput, latency
// and what each pipeline stage did.

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace troupe::apps {

struct BenchOptions {
  std::string model_path;  // empty: the embedded default model
  std::string device = "CPU";
  std::string hint = "throughput";
  int nireq = 0;     // 0: the compiled model's OPTIMAL_NUMBER_OF_INFER_REQUESTS
  int nstreams = 0;  // 0: from the hint
  int nthreads = 0;  // 0: every core
  double time_s = 0;
  int64_t niter = 0;
  bool perf_counts = false;
  std::vector<std::string> report;  // {"json", FILE} when asked for
  std::string trace_path;           // Chrome Trace Event / Perfetto JSON of the run
  std::string timeline_path;        // SVG picture of stage occupancy
};

/// Adds the `bench` subcommand to `app`, parsing into `options`.
CLI::App* add_bench_command(CLI::App& app, BenchOptions& options);

/// Runs the benchmark; returns the process exit code. Errors go to stderr.
int run_bench(const BenchOptions& options);

}  // namespace troupe::apps
