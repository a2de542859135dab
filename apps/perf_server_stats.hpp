#pragma once

// The server-side breakdown from the statistics extension (GET /v2/models/NAME/stats), whose
// JSON follows Triton's: model_stats[i].inference_stats.{success,fail,queue,compute_input,
// compute_infer,compute_output}.{count,ns}, cumulative since the model was loaded.

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/perf_endpoint.hpp"

namespace troupe::apps {

/// A cumulative count and the nanoseconds spent over it.
struct StatDuration {
  uint64_t count = 0;
  uint64_t ns = 0;
};

/// One model version's cumulative inference statistics.
struct InferenceStats {
  StatDuration success, fail, queue, compute_input, compute_infer, compute_output;
};

/// What the server spent per request between two readings, in µs (0 where it counted nothing).
struct ServerBreakdown {
  uint64_t requests = 0;  // successful, as the server counted them
  double queue_us = 0, compute_input_us = 0, compute_infer_us = 0, compute_output_us = 0;
};

/// The statistics of `version` (any, when empty: the first entry) in a stats reply; nullopt when
/// the reply has no such entry.
std::optional<InferenceStats> stats_from_json(const nlohmann::json& body,
                                              const std::string& version);

/// The per-request averages of what happened between `before` and `after`.
ServerBreakdown breakdown(const InferenceStats& before, const InferenceStats& after);

/// Reads the statistics over HTTP. Returns nullopt and sets `problem` (when given) when the
/// server does not answer them: no statistics extension, an unreadable reply, no connection.
std::optional<InferenceStats> read_server_stats(const Endpoint& http, const std::string& model,
                                                const std::string& version, double timeout_s,
                                                std::string* problem = nullptr);

}  // namespace troupe::apps
