#pragma once

// Running `troupe bench`'s requests: the first inference alone, then the measured phase with every
// request in flight until -niter or the time limit.

#include <cstddef>
#include <exception>
#include <string>
#include <vector>

#include "apps/bench_options.hpp"
#include "troupe/compiled_model.hpp"
#include "troupe/infer_request.hpp"

namespace troupe::apps {

/// What the measured phase observed.
struct Measurement {
  std::vector<double> latencies_ms;  // start_async to callback, of each request that succeeded
  size_t failed = 0;
  std::exception_ptr first_error;  // null when no request failed
  double duration_s = 0;           // from the first start until every request has come back
};

/// Runs `request` once, synchronously, and returns how long it took in ms.
double time_first_inference(InferRequest& request);

/// Keeps every request in flight (each restarts from its own completion callback) until -niter
/// runs have started or the time limit has passed, or a request failed, drawing a progress bar on
/// a terminal. The compiled model's pipeline statistics are reset first, so they describe this
/// phase alone.
Measurement run_measured_phase(const CompiledModel& compiled, std::vector<InferRequest>& requests,
                               const BenchOptions& options);

/// The message of a failed request's exception.
std::string error_text(const std::exception_ptr& error);

}  // namespace troupe::apps
