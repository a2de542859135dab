#pragma once

#include <cstdint>
#include <string>

namespace troupe {

/// One entry of InferRequest::profiling_info(): a pipeline stage or an executed node.
struct ProfilingInfo {
  enum class Status { not_run, optimized_out, executed };
  std::string name;
  Status status = Status::not_run;
  int64_t real_time_us = 0;  // wall time
  int64_t cpu_time_us = 0;   // thread CPU time (measured when PERF_COUNT is enabled, else 0)
  std::string exec_type;     // implementation, e.g. "ref" or a oneDNN kernel name
  std::string node_type;     // op type, or "Stage" for the pipeline stages
  /// Stage entries: how long the request waited before the stage; before preprocessing that is
  /// its wait in the scheduler's queue (for a batch to fill, a credit, its priority).
  int64_t queue_us = 0;
  /// The execute stage's entry: how many requests shared its run (dynamic batching), else 0.
  int64_t batch_size = 0;
};

/// Names of the five stage entries, in pipeline order.
inline constexpr const char* stage_names[5] = {
    "1. input preprocessing", "2. input transfer to a device", "3. execution time",
    "4. output transfer from a device", "5. output postprocessing"};

}  // namespace troupe
