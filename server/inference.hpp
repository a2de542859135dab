#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "server/serve_error.hpp"
#include "server/served_model.hpp"
#include "troupe/actor_protocol.hpp"

namespace caf {
class actor_system;
}

namespace troupe::server {

/// The result of one inference: outputs, or the error that stopped it.
struct InferenceResult {
  NamedTensors outputs;
  std::optional<ServeError> error;
};

/// A request's scheduling parameters (KServe request `parameters` "priority" and "timeout", as
/// Triton names them): priority 1 is the highest, 0 the model's default; timeout in µs, 0 the
/// model's default (honoured when its config allows timeout overrides).
struct RequestScheduling {
  int64_t priority = 0;
  int64_t timeout_us = 0;
};

/// Called once per request, on a CAF worker thread: it must hand the result to the network
/// layer (post to its executor) and return; it must not block.
using InferenceCallback = std::function<void(InferenceResult)>;

/// The actors through which a server's front ends send requests to model actors: a few
/// long-lived relays, taken in turn, each with any number of requests outstanding. (An actor
/// spawned per request cost a spawn, and at its exit a wake-up of CAF's clock thread: a sixth of
/// the server's CPU time on a tiny model over gRPC.) Created on first use; a relay lives while
/// replies are due to it, so destroying this object loses no reply.
class InferenceRelays {
 public:
  InferenceRelays();
  ~InferenceRelays();
  InferenceRelays(const InferenceRelays&) = delete;
  InferenceRelays& operator=(const InferenceRelays&) = delete;

  /// Sends `inputs` to the model's actor as (infer_atom, NamedTensors) and calls `done` with its
  /// reply. The ticket keeps the model loaded until the reply is handed over; the model's
  /// request counters are updated (duration from `start_ns`, steady clock).
  void infer_async(caf::actor_system& system, ServedModel::Ticket ticket, NamedTensors inputs,
                   RequestScheduling scheduling, int64_t start_ns, InferenceCallback done);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The ServeError for a model actor's error reply (category "troupe": invalid input -> 400,
/// pipeline full / cancelled -> 503, execution failed -> 500).
ServeError serve_error_of(caf::actor_system& system, const caf::error& error);

/// Counts a request that failed before it reached the model actor (malformed, refused).
void record_failure(ServedModel& model, ServeErrc code, int64_t start_ns);

/// Steady-clock nanoseconds.
int64_t steady_now_ns();

}  // namespace troupe::server
