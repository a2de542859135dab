#pragma once

#include <memory>
#include <string>

#include "server/model_repository.hpp"

namespace troupe::server {

/// Prometheus `/metrics` (text format) on its own port. Values are read from the models' counters
/// at each scrape, so serving a request costs no metrics bookkeeping beyond those counters.
/// Names (labels model, version; Triton's semantics with the troupe_ prefix):
///   troupe_inference_request_success, troupe_inference_request_failure{reason},
///   troupe_inference_count, troupe_inference_exec_count, troupe_inference_request_duration_us,
///   troupe_inference_queue_duration_us, troupe_inference_compute_input_duration_us,
///   troupe_inference_compute_infer_duration_us, troupe_inference_compute_output_duration_us
///   (counters), troupe_inference_pending_request_count (gauge),
///   troupe_pipeline_stage_busy_us{stage} (counter, per pipeline stage).
class Metrics {
 public:
  /// Listens on host:port (0 = a free port); throws ServeError when it cannot.
  Metrics(ModelRepository& repository, const std::string& host, int port);
  ~Metrics();
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::server
