#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "actors/request_state.hpp"
#include "troupe/pipeline_counters.hpp"

namespace troupe::detail {

/// Summary of one stage over all recorded requests.
struct StageSummary {
  std::string name;
  size_t count = 0;
  double mean_us = 0, p50_us = 0, p90_us = 0, p99_us = 0, max_us = 0;
  double queue_wait_mean_us = 0;     // previous stage's end (or submission) to this stage's start
  double busy_us = 0;                // sum of durations (a batch's shared once)
  double mean_batch = 1;             // requests per run (automatic batching in execute)
  std::map<int, double> batch_runs;  // execute: runs per batch size (dynamic batching)
  double occupancy = 0;              // busy / (wall * workers of the stage)
  int workers = 1;
};

/// Everything `troupe bench` and CompiledModel::stats_report print.
struct PipelineSummary {
  size_t requests = 0;
  size_t failed = 0;
  double wall_us = 0;         // first submission to last completion
  double mean_in_flight = 0;  // time-average of requests between submission and completion
  double stage_overlap = 0;   // sum of stage busy time / wall time
  std::array<StageSummary, stage_count> stages;
  std::string bottleneck;  // one sentence naming the limiting stage
};

/// Collects the traces of completed requests of one compiled model (thread-safe).
class PipelineStats {
 public:
  explicit PipelineStats(int execute_streams) : execute_streams_(execute_streams) {}
  void record(const RequestTrace& trace, bool failed);
  void reset();
  PipelineSummary summary() const;
  std::vector<RequestTrace> traces() const;
  /// Totals since construction; reset() does not clear them.
  PipelineCounters counters() const;

 private:
  void accumulate(const RequestTrace& trace, bool failed);  // mutex_ held

  int execute_streams_;
  mutable std::mutex mutex_;
  std::vector<RequestTrace> traces_;
  size_t failed_ = 0;
  PipelineCounters totals_;
  std::map<int, BatchCounter> batch_requests_;  // requests (not executions) per batch size
};

std::string format_summary(const PipelineSummary& summary);

}  // namespace troupe::detail
