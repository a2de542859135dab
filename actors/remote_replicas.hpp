#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/io/middleman_actor.hpp>

#include "troupe/actor_protocol.hpp"

namespace troupe::actors {

/// One replica a remote-backed pipeline may send a request to: a local compiled model's actor
/// or a model actor on another node, found again through `endpoint` after it was lost.
struct Replica {
  model_actor actor;     // invalid while lost
  std::string endpoint;  // "host:port" of the node's model directory; empty for a local replica
  std::string host;      // the endpoint's parts
  uint16_t port = 0;
  std::string model;     // the name the directory publishes it under
  std::string label;     // "local" or the endpoint, as reports and errors name it
};

/// Counters of a remote-backed pipeline's router (read by get_property and reports).
struct RouterCounters {
  std::atomic<int64_t> sent{0};         // requests sent to a replica (retries included)
  std::atomic<int64_t> retried{0};      // requests re-sent to another replica after a loss
  std::atomic<int64_t> unavailable{0};  // requests failed because no replica answered
  std::atomic<int64_t> replicas_lost{0};
  std::atomic<int64_t> reconnects{0};
};

/// What the router stage of a remote-backed pipeline works with (PipelineContext::remote).
struct RemoteReplicas {
  std::vector<Replica> replicas;
  /// How long a replica may take to answer one request before it counts as lost.
  std::chrono::milliseconds request_timeout{30000};
  /// How often a lost replica's endpoint is tried again.
  std::chrono::milliseconds reconnect_interval{500};
  /// Finds lost replicas again: the middleman's actor, or OpenSSL's when the node uses TLS.
  caf::io::middleman_actor connector;
  RouterCounters counters;
  /// Keeps what the replicas' actors need alive (a local replica's CompiledModel).
  std::shared_ptr<void> keep_alive;
};

}  // namespace troupe::actors
