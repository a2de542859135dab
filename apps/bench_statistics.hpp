#pragma once

// The figures `troupe bench` reports for its measured phase: count, throughput, latency
// percentiles and what the pipeline's stages did.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <vector>

#include "actors/pipeline_stats.hpp"
#include "apps/bench_runner.hpp"
#include "troupe/compiled_model.hpp"

namespace troupe::apps {

/// Of the requests that succeeded, in ms; percentiles interpolate linearly between the closest
/// ranks, as the pipeline statistics do. All 0 when none did.
struct LatencySummary {
  double median = 0, average = 0, min = 0, max = 0, p90 = 0, p99 = 0;
};

struct RunResults {
  double first_inference_ms = 0;  // timed alone, before the measured phase
  size_t count = 0;               // requests that succeeded in the measured phase
  size_t failed = 0;
  std::exception_ptr first_error;  // null when no request failed
  double duration_s = 0;
  double throughput_fps = 0;  // count x batch per second, as benchmark_app counts
  LatencySummary latency;
  detail::PipelineSummary pipeline;
  int64_t merged_run_fallbacks = 0;  // automatic batching: merged runs redone one request each
  /// The process's peak resident set size so far (getrusage), loading and compiling included.
  int64_t peak_rss_bytes = 0;
  /// Its resident set size when the measured phase ended (/proc/self/statm): what serving the
  /// model holds, without the transient peaks of loading and compiling.
  int64_t rss_bytes = 0;
};

/// The results of `measurement`, a run of requests of `batch` elements each, with the statistics
/// `compiled`'s pipeline collected meanwhile.
RunResults summarize_run(double first_inference_ms, const Measurement& measurement, int64_t batch,
                         const CompiledModel& compiled);

}  // namespace troupe::apps
