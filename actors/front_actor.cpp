// The typed front door for CAF applications: (infer_atom, NamedTensors) in, outputs or an error
// out. Each message becomes a pipeline request of its own; the reply is delivered from this actor
// when the completion actor reports the request done.

#include "actors/front_actor.hpp"

#include <map>

#include <nlohmann/json.hpp>

#include "actors/tensor_checks.hpp"

namespace troupe::actors {

struct FrontState {
  struct Pending {
    caf::typed_response_promise<NamedTensors> promise;
    std::shared_ptr<detail::RequestState> request;
  };
  uint64_t next_token = 1;
  std::map<uint64_t, Pending> pending;
  bool closed = false;
};

namespace {

caf::error error_for(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const Cancelled& e) {
    return make_actor_error(ActorErrc::cancelled, e.what());
  } catch (const QueueFull& e) {
    return make_actor_error(ActorErrc::pipeline_full, e.what());
  } catch (const RequestTimeout& e) {
    return make_actor_error(ActorErrc::timeout, e.what());
  } catch (const InvalidArgument& e) {
    return make_actor_error(ActorErrc::invalid_input, e.what());
  } catch (const std::exception& e) {
    return make_actor_error(ActorErrc::execution_failed, e.what());
  } catch (...) {
    return make_actor_error(ActorErrc::execution_failed, "unknown error");
  }
}

}  // namespace

namespace {

// One request from a message: checked, then submitted; the reply is promised until completion.
caf::result<NamedTensors> start(front_actor_type::stateful_pointer<FrontState> self,
                                const Context& ctx, const Handles& next, NamedTensors& inputs,
                                int64_t priority, int64_t timeout_us) {
  auto& st = self->state;
  if (st.closed) return make_actor_error(ActorErrc::cancelled, "the compiled model was destroyed");
  // Bounded: a client flooding the actor gets an error instead of an ever-growing queue.
  if (st.pending.size() >= static_cast<size_t>(4 * ctx->config.max_in_flight))
    return make_actor_error(ActorErrc::pipeline_full,
                            "queue full: " + std::to_string(st.pending.size()) +
                                " requests already wait at the model actor");
  auto request = std::make_shared<detail::RequestState>();
  request->inputs.resize(ctx->inputs.size());
  request->outputs.resize(ctx->outputs.size());
  request->caller_output.assign(ctx->outputs.size(), false);
  for (const auto& [name, tensor] : inputs) {
    size_t i = 0;
    while (i < ctx->inputs.size() && ctx->inputs[i].name != name) ++i;
    if (i == ctx->inputs.size())
      return make_actor_error(ActorErrc::invalid_input,
                              "the model has no input named '" + name + "'");
    try {
      check_tensor_fits("input", ctx->inputs[i], tensor);
    } catch (const std::exception& e) {
      return make_actor_error(ActorErrc::invalid_input, e.what());
    }
    request->inputs[i] = tensor;
  }
  for (size_t i = 0; i < ctx->inputs.size(); ++i)
    if (request->inputs[i].empty())
      return make_actor_error(ActorErrc::invalid_input,
                              "input '" + ctx->inputs[i].name + "' is missing");
  const uint64_t token = st.next_token++;
  auto me = caf::actor_cast<caf::actor>(self);
  request->on_complete = [me, token](detail::RequestState&, std::exception_ptr,
                                     caf::execution_unit* unit) {
    // Sent as from the completing worker's actor: the front actor then runs next on that worker.
    send_from(unit, me, done_atom::value, token);
  };
  request->priority = priority;
  request->timeout_us = timeout_us;
  request->busy = true;
  auto promise = self->make_response_promise<NamedTensors>();
  st.pending.emplace(token, FrontState::Pending{promise, request});
  submit_request(*ctx, next->scheduler, std::move(request), self->context());
  return promise;
}

nlohmann::json describe_values(const std::vector<ValueInfo>& values) {
  auto list = nlohmann::json::array();
  for (const ValueInfo& v : values)
    list.push_back(
        {{"name", v.name}, {"type", std::string(to_string(v.type))}, {"shape", v.shape.dims()}});
  return list;
}

// What a client of this actor (a remote node in particular) needs to act like a local compiled
// model: names, types and shapes of the inputs and outputs, and the properties it reports.
std::string describe(const PipelineContext& ctx) {
  nlohmann::json properties = nlohmann::json::object();
  for (const auto& [key, value] : ctx.config.to_properties()) properties[key] = value.as_string();
  properties["OPTIMAL_NUMBER_OF_INFER_REQUESTS"] = std::to_string(ctx.config.optimal_requests);
  properties["NETWORK_NAME"] = ctx.name;
  return nlohmann::json{{"name", ctx.name},
                        {"inputs", describe_values(ctx.inputs)},
                        {"outputs", describe_values(ctx.outputs)},
                        {"properties", properties}}
      .dump();
}

front_actor_type::behavior_type front_actor(front_actor_type::stateful_pointer<FrontState> self,
                                            Context ctx, Handles next) {
  return {
      [self, ctx, next](infer_atom, NamedTensors& inputs) -> caf::result<NamedTensors> {
        return start(self, ctx, next, inputs, 0, 0);
      },
      [self, ctx, next](infer_atom, NamedTensors& inputs, int64_t priority,
                        int64_t timeout_us) -> caf::result<NamedTensors> {
        // Checked by the scheduler against the model's policy (InvalidArgument naming them).
        return start(self, ctx, next, inputs, priority, timeout_us);
      },
      [ctx](describe_atom) { return describe(*ctx); },
      [self, ctx](done_atom, uint64_t token) {
        auto it = self->state.pending.find(token);
        if (it == self->state.pending.end()) return;
        auto pending = std::move(it->second);
        self->state.pending.erase(it);
        std::exception_ptr error;
        {
          std::lock_guard<std::mutex> lock(pending.request->mutex);
          error = pending.request->error;
        }
        if (error) {
          pending.promise.deliver(error_for(error));
          return;
        }
        NamedTensors outputs;
        for (size_t i = 0; i < ctx->outputs.size(); ++i)
          outputs.emplace(ctx->outputs[i].name, pending.request->outputs[i]);
        pending.promise.deliver(std::move(outputs));
      },
      [self](drain_atom) {
        self->state.closed = true;
        for (auto& [token, pending] : self->state.pending)
          pending.promise.deliver(
              make_actor_error(ActorErrc::cancelled, "the compiled model was destroyed"));
        self->state.pending.clear();
        self->quit();
      },
  };
}
}  // namespace

front_actor_type spawn_front_actor(caf::actor_system& system, Context ctx, Handles next) {
  return system.spawn(front_actor, std::move(ctx), std::move(next));
}

}  // namespace troupe::actors
