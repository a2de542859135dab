#pragma once

// The infer requests `troupe bench` keeps in flight, each with its input tensors set.

#include <cstdint>
#include <vector>

#include "apps/bench_model.hpp"
#include "apps/bench_options.hpp"
#include "troupe/infer_request.hpp"
#include "troupe/shape.hpp"

namespace troupe::apps {

struct Workload {
  std::vector<InferRequest> requests;
  std::vector<Shape> input_shapes;  // per compiled input, the shape its tensors have
  bool had_dynamic = false;         // a dynamic dimension -b/-shape did not give was set to 1
  int64_t batch = 1;                // what throughput counts per request
};

/// --nireq requests (default: OPTIMAL_NUMBER_OF_INFER_REQUESTS), their inputs in the shapes -shape
/// and -b give: the default model's own inputs without -m, else deterministic values in [0, 1) (or
/// small integers), different per request.
Workload make_workload(BenchModel& model, const BenchOptions& options);

}  // namespace troupe::apps
