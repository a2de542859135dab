#include "server/inference.hpp"

#include <chrono>

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

void infer_async(caf::actor_system& system, ServedModel::Ticket ticket, NamedTensors inputs,
                 RequestScheduling scheduling, int64_t start_ns, InferenceCallback done) {
  auto shared_ticket = std::make_shared<ServedModel::Ticket>(std::move(ticket));
  auto callback = std::make_shared<InferenceCallback>(std::move(done));
  const uint64_t items = batch_items(inputs);
  model_actor target = shared_ticket->model().actor();
  system.spawn([shared_ticket, callback, items, start_ns, target, scheduling,
                inputs = std::move(inputs)](caf::event_based_actor* self) mutable {
    auto finish = [shared_ticket, callback, items, start_ns](InferenceResult result) {
      account(shared_ticket->model(), result, items, start_ns);
      try {
        (*callback)(std::move(result));
      } catch (...) {
        // The network layer owns its errors; a throwing callback must not kill this actor's worker.
      }
    };
    self->request(target, caf::infinite, infer_atom::value, std::move(inputs), scheduling.priority,
                  scheduling.timeout_us)
        .then(
            [finish](NamedTensors& outputs) {
              finish(InferenceResult{std::move(outputs), {}});
            },
            [finish, self](caf::error& error) {
              finish(InferenceResult{{}, serve_error_of(self->system(), error)});
            });
  });
}

}  // namespace troupe::server
