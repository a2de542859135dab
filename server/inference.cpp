#include "server/inference.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <caf/all.hpp>

namespace troupe::server {

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ServeError serve_error_of(caf::actor_system& system, const caf::error& error) {
  std::string message;
  if (error.category() == troupe_error_category) {
    if (error.context().match_elements<std::string>())
      message = error.context().get_as<std::string>(0);
    switch (static_cast<ActorErrc>(error.code())) {
      case ActorErrc::invalid_input:
        return ServeError(ServeErrc::bad_request, message);
      case ActorErrc::pipeline_full:  // the message says "queue full: ..."
      case ActorErrc::timeout:
        return ServeError(ServeErrc::unavailable, message);
      case ActorErrc::cancelled:
        return ServeError(ServeErrc::unavailable, message);
      case ActorErrc::execution_failed:
        return ServeError(ServeErrc::internal, message);
      case ActorErrc::unknown_model:  // a directory's answer; a served model never gives it
      case ActorErrc::remote_unavailable:
        return ServeError(ServeErrc::unavailable, message);
    }
  }
  return ServeError(ServeErrc::unavailable,
                    "the model actor did not answer: " + system.render(error));
}

namespace {

uint64_t batch_items(const NamedTensors& inputs) {
  for (const auto& [name, tensor] : inputs)
    if (tensor.shape().rank() > 0)
      return static_cast<uint64_t>(std::max<int64_t>(1, tensor.shape()[0]));
  return 1;
}

}  // namespace

void record_failure(ServedModel& model, ServeErrc code, int64_t start_ns) {
  RequestCounters& c = model.counters();
  ++c.failure;
  c.failure_ns += static_cast<uint64_t>(std::max<int64_t>(0, steady_now_ns() - start_ns));
  ++c.failures_by_reason[static_cast<size_t>(code)];
}

namespace {

void account(ServedModel& model, const InferenceResult& result, uint64_t items, int64_t start_ns) {
  RequestCounters& c = model.counters();
  const auto ns = static_cast<uint64_t>(std::max<int64_t>(0, steady_now_ns() - start_ns));
  if (result.error) {
    record_failure(model, result.error->code(), start_ns);
  } else {
    ++c.success;
    c.last_inference_ms =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
    c.success_ns += ns;
    c.inference_count += items;
  }
}

}  // namespace

// One request on its way through a relay.
struct RelayedRequest {
  explicit RelayedRequest(ServedModel::Ticket t) : ticket(std::move(t)) {}
  ServedModel::Ticket ticket;
  NamedTensors inputs;
  RequestScheduling scheduling;
  int64_t start_ns = 0;
  uint64_t items = 0;
  InferenceCallback done;
};

}  // namespace troupe::server

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<troupe::server::RelayedRequest>)

namespace troupe::server {
namespace {

using relay_atom = caf::atom_constant<caf::atom("relay")>;

void finish(RelayedRequest& request, InferenceResult result) {
  account(request.ticket.model(), result, request.items, request.start_ns);
  try {
    request.done(std::move(result));
  } catch (...) {
    // The network layer owns its errors; a throwing callback must not kill the relay.
  }
}

caf::behavior relay(caf::event_based_actor* self) {
  return {
      [self](relay_atom, std::shared_ptr<RelayedRequest>& request) {
        const model_actor target = request->ticket.model().actor();
        self->request(target, caf::infinite, infer_atom::value, std::move(request->inputs),
                      request->scheduling.priority, request->scheduling.timeout_us)
            .then(
                [request](NamedTensors& outputs) {
                  finish(*request, InferenceResult{std::move(outputs), {}});
                },
                [request, self](caf::error& error) {
                  finish(*request, InferenceResult{{}, serve_error_of(self->system(), error)});
                });
      },
  };
}

}  // namespace

struct InferenceRelays::Impl {
  std::once_flag spawned;
  std::vector<caf::actor> relays;
  std::atomic<size_t> next{0};
};

InferenceRelays::InferenceRelays() : impl_(std::make_unique<Impl>()) {}

// The handles go; each relay exits once no reply is due to it (a pending request holds it).
InferenceRelays::~InferenceRelays() = default;

void InferenceRelays::infer_async(caf::actor_system& system, ServedModel::Ticket ticket,
                                  NamedTensors inputs, RequestScheduling scheduling,
                                  int64_t start_ns, InferenceCallback done) {
  std::call_once(impl_->spawned, [&] {
    // As many as CAF has workers: replies (and the encoding the callbacks do) spread over them.
    const size_t count = std::max<size_t>(2, system.scheduler().num_workers());
    for (size_t i = 0; i < count; ++i) impl_->relays.push_back(system.spawn(relay));
  });
  auto request = std::make_shared<RelayedRequest>(std::move(ticket));
  request->items = batch_items(inputs);
  request->inputs = std::move(inputs);
  request->scheduling = scheduling;
  request->start_ns = start_ns;
  request->done = std::move(done);
  const size_t i = impl_->next.fetch_add(1, std::memory_order_relaxed) % impl_->relays.size();
  caf::anon_send(impl_->relays[i], relay_atom::value, std::move(request));
}

}  // namespace troupe::server
