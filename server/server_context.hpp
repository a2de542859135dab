#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "server/inference.hpp"
#include "server/model_repository.hpp"

namespace caf {
class actor_system;
}

namespace troupe::server {

class Metrics;

/// Bounds on what a client may send; each violation is a 400 naming the limit.
struct ServerLimits {
  size_t max_body_bytes = size_t{256} << 20;       // HTTP body / gRPC message
  int64_t max_tensor_elements = int64_t{1} << 28;  // per input tensor
  int max_json_depth = 32;                         // nesting of a JSON body (nested `data`)
  std::chrono::seconds read_timeout{30};           // to receive one whole request
  std::chrono::seconds idle_timeout{60};           // a keep-alive connection with no request
};

/// What every front end (HTTP, gRPC) shares: the models, the actor system, the limits.
struct ServerContext {
  caf::actor_system& system;
  ModelRepository& repository;
  ServerLimits limits;
  Metrics* metrics = nullptr;         // null: no metrics
  std::atomic<bool> accepting{true};  // false once shutdown began: new requests get 503
  InferenceRelays relays{};           // the front ends' way to the model actors
};

/// The server's name and version for server metadata.
inline constexpr const char* server_name = "troupe";
/// The protocol extensions this server implements (server metadata's `extensions`).
std::vector<std::string> server_extensions();

}  // namespace troupe::server
