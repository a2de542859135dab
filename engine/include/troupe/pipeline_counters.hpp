#pragma once

#include <array>
#include <cstdint>
#include <map>

namespace troupe {

/// Cumulative time of one pipeline stage over every request since the model was compiled.
struct StageCounter {
  uint64_t runs = 0;      // requests that passed the stage
  uint64_t busy_ns = 0;   // time in the stage (a merged batch's time counted once)
  uint64_t queue_ns = 0;  // time each request waited for the stage to pick it up
};

/// Executions of one batch size in the execute stage (automatic or dynamic batching).
struct BatchCounter {
  uint64_t executions = 0;
  uint64_t ns = 0;  // execute time of those executions
};

/// Monotonic counters of a compiled model's pipeline: what a server reports as statistics and
/// metrics. Unlike CompiledModel::stats_report they never forget a request.
struct PipelineCounters {
  /// Stage order: preprocess, upload, execute, download, postprocess.
  static constexpr std::array<const char*, 5> stage_names = {"preprocess", "upload", "execute",
                                                             "download", "postprocess"};
  uint64_t success = 0;
  uint64_t failure = 0;
  uint64_t request_ns = 0;  // submission to completion, summed over requests
  std::array<StageCounter, 5> stages{};
  std::map<int, BatchCounter> batches;  // by batch size
};

}  // namespace troupe
