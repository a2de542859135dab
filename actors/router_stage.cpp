// Router: the stage of a remote-backed pipeline (Core::connect_remote / connect_replicas) that
// stands where upload, execute and download stand in a local one. Each request goes to the
// reachable replica with the fewest requests outstanding; its inputs travel as (infer_atom,
// NamedTensors), with a timeout (CAF 0.17 reports nothing for a message the other node failed to
// deserialize, so a lost reply must not hang anyone). A replica that goes down (CAF's down
// message when its node disconnects or dies) or times out is marked lost: its outstanding
// requests are sent once more to another replica (inference is idempotent) or fail with
// RemoteUnavailable, and its endpoint is tried again every reconnect_interval until it answers.
// A reply that arrives for an attempt already given up is dropped, so no request is answered
// twice. The execute span of each request is its remote round trip (worker = replica index).

#include "actors/router_stage.hpp"
#include "actors/remote_replicas.hpp"
#include "actors/tensor_checks.hpp"

namespace troupe::actors {

namespace {

using reconnect_atom = caf::atom_constant<caf::atom("reconnect")>;

constexpr size_t no_replica = static_cast<size_t>(-1);

struct Pending {
  request_msg msg;
  size_t replica = 0;
  int attempts = 0;
  uint64_t attempt_id = 0;  // a reply for any other attempt is stale and dropped
};

struct RouterState {
  std::vector<int64_t> outstanding;  // per replica
  std::vector<bool> connecting;      // a reconnection attempt is under way
  std::map<uint64_t, Pending> pending;
  uint64_t next_token = 1;
  uint64_t next_attempt = 1;
  size_t round_robin = 0;
};

using Self = caf::stateful_actor<RouterState>;

std::string error_text(const caf::error& e) {
  const caf::message& context = e.context();
  if (context.match_elements<std::string>()) return context.get_as<std::string>(0);
  return caf::to_string(e);
}

// Whether a failed attempt says something about the replica (lost, shutting down, full) rather
// than about the request (bad input, a kernel error, its own queue timeout).
bool replica_failed(const caf::error& e) {
  if (e.category() != troupe_error_category) return true;  // transport: timeout, receiver down
  const auto code = static_cast<ActorErrc>(e.code());
  return code == ActorErrc::cancelled || code == ActorErrc::pipeline_full ||
         code == ActorErrc::unknown_model || code == ActorErrc::remote_unavailable;
}

std::exception_ptr exception_for(const caf::error& e, const std::string& replica) {
  const std::string text = error_text(e);
  if (e.category() == troupe_error_category) {
    switch (static_cast<ActorErrc>(e.code())) {
      case ActorErrc::invalid_input:
        return std::make_exception_ptr(InvalidArgument(text));
      case ActorErrc::pipeline_full:
        return std::make_exception_ptr(QueueFull(text + " (replica " + replica + ")"));
      case ActorErrc::timeout:
        return std::make_exception_ptr(RequestTimeout(text));
      case ActorErrc::execution_failed:
        return std::make_exception_ptr(ExecutionError(text + " (replica " + replica + ")"));
      default:
        break;
    }
  }
  return std::make_exception_ptr(
      RemoteUnavailable("replica " + replica + " did not answer: " + text));
}

class Router {
 public:
  Router(Self* self, Context ctx, Handles next)
      : self_(self), ctx_(std::move(ctx)), next_(std::move(next)), remote_(*ctx_->remote) {
    const size_t n = remote_.replicas.size();
    self_->state.outstanding.assign(n, 0);
    self_->state.connecting.assign(n, false);
    for (size_t r = 0; r < n; ++r) {
      if (remote_.replicas[r].actor)
        self_->monitor(remote_.replicas[r].actor);
      else
        schedule_reconnect(r);
    }
  }

  void route(batch_msg& batch) {
    for (request_msg& msg : batch.requests) {
      auto& span = msg.trace.stages[static_cast<size_t>(detail::Stage::execute)];
      span.start_ns = detail::now_ns();
      if (!msg.error) {
        try {
          if (msg.state->cancel_requested.load(std::memory_order_relaxed))
            throw Cancelled("infer request was cancelled");
          if (ctx_->hook) ctx_->hook(detail::Stage::execute, msg.id);
        } catch (...) {
          msg.error = std::current_exception();
        }
      }
      if (msg.error) {
        finish(std::move(msg));
        continue;
      }
      const uint64_t token = self_->state.next_token++;
      Pending& p = self_->state.pending[token];
      p.msg = std::move(msg);
      dispatch(token, std::nullopt);
    }
  }

  void on_down(const caf::down_msg& down) {
    for (size_t r = 0; r < remote_.replicas.size(); ++r)
      if (remote_.replicas[r].actor && remote_.replicas[r].actor.address() == down.source)
        lose(r, "its node went down (" + caf::to_string(down.reason) + ")");
  }

  void reconnect(size_t r) {
    Replica& replica = remote_.replicas[r];
    if (replica.actor || self_->state.connecting[r]) return;
    self_->state.connecting[r] = true;
    const auto timeout = remote_.request_timeout;
    self_->request(remote_.connector, timeout, caf::connect_atom::value, replica.host,
                   replica.port)
        .then(
            [this, r, timeout](caf::node_id&, caf::strong_actor_ptr& ptr,
                               std::set<std::string>& interface) {
              if (!ptr || !self_->system().assignable<model_directory>(interface)) {
                retry_later(r);
                return;
              }
              auto directory = caf::actor_cast<model_directory>(ptr);
              self_->request(directory, timeout, lookup_atom::value, remote_.replicas[r].model)
                  .then([this, r](model_actor& actor) { restore(r, std::move(actor)); },
                        [this, r](caf::error&) { retry_later(r); });
            },
            [this, r](caf::error&) { retry_later(r); });
  }

 private:
  // The reachable replica with the fewest outstanding requests, other than `avoid`; ties go
  // round robin so equal replicas share the load.
  std::optional<size_t> choose(std::optional<size_t> avoid) {
    auto& st = self_->state;
    const size_t n = remote_.replicas.size();
    std::optional<size_t> best;
    for (size_t k = 0; k < n; ++k) {
      const size_t r = (st.round_robin + k) % n;
      if (!remote_.replicas[r].actor || (avoid && *avoid == r)) continue;
      if (!best || st.outstanding[r] < st.outstanding[*best]) best = r;
    }
    if (best) st.round_robin = (*best + 1) % n;
    return best;
  }

  void dispatch(uint64_t token, std::optional<size_t> avoid) {
    auto& st = self_->state;
    Pending& p = st.pending.at(token);
    const auto r = choose(avoid);
    if (!r) {
      std::string lost;
      for (const Replica& replica : remote_.replicas)
        lost += (lost.empty() ? "" : ", ") + replica.label;
      fail(token, std::make_exception_ptr(RemoteUnavailable(
                      "no replica of the model is reachable (replicas: " + lost + ")")));
      ++remote_.counters.unavailable;
      return;
    }
    p.replica = *r;
    ++p.attempts;
    p.attempt_id = st.next_attempt++;
    ++st.outstanding[*r];
    ++remote_.counters.sent;
    NamedTensors inputs;
    const auto& st_inputs = p.msg.state->model_inputs;
    for (size_t i = 0; i < ctx_->inputs.size(); ++i)
      inputs.emplace(ctx_->inputs[i].name, st_inputs[i]);
    const uint64_t attempt = p.attempt_id;
    const int64_t priority = p.msg.state->priority;
    auto on_reply = [this, token, attempt](NamedTensors& outputs) {
      if (auto* p = current(token, attempt)) {
        --self_->state.outstanding[p->replica];
        deliver(token, outputs);
      }
    };
    auto on_error = [this, token, attempt](caf::error& e) {
      if (auto* p = current(token, attempt)) {
        const size_t replica = p->replica;
        --self_->state.outstanding[replica];
        if (!replica_failed(e)) {
          fail(token, exception_for(e, remote_.replicas[replica].label));
          return;
        }
        // Detached from its replica first, so losing the replica does not handle it twice.
        p->attempt_id = 0;
        p->replica = no_replica;
        if (e.category() != troupe_error_category ||
            static_cast<ActorErrc>(e.code()) == ActorErrc::cancelled)
          lose(replica, error_text(e));
        retry_or_fail(token, e, replica);
      }
    };
    const Replica& replica = remote_.replicas[*r];
    // A local replica is not timed out: it cannot be lost, and it may still read the caller's
    // input tensor (shared, not copied) after a retry elsewhere had completed the request.
    const caf::duration timeout = replica.endpoint.empty()
                                      ? caf::duration(caf::infinite)
                                      : caf::duration(remote_.request_timeout);
    if (priority != 0)
      self_->request(replica.actor, timeout, infer_atom::value, std::move(inputs), priority,
                     int64_t{0})
          .then(on_reply, on_error);
    else
      self_->request(replica.actor, timeout, infer_atom::value, std::move(inputs))
          .then(on_reply, on_error);
  }

  Pending* current(uint64_t token, uint64_t attempt) {
    auto it = self_->state.pending.find(token);
    if (it == self_->state.pending.end() || it->second.attempt_id != attempt) return nullptr;
    return &it->second;
  }

  void retry_or_fail(uint64_t token, const caf::error& e, size_t from) {
    Pending& p = self_->state.pending.at(token);
    if (p.attempts < 2 && choose(from)) {
      ++remote_.counters.retried;
      dispatch(token, from);
      return;
    }
    if (replica_failed(e)) ++remote_.counters.unavailable;
    fail(token, exception_for(e, remote_.replicas[from].label));
  }

  // Marks replica `r` lost: new requests avoid it, its outstanding ones go elsewhere once.
  void lose(size_t r, const std::string& why) {
    Replica& replica = remote_.replicas[r];
    if (!replica.actor) return;
    self_->demonitor(replica.actor.address());
    replica.actor = model_actor();
    ++remote_.counters.replicas_lost;
    std::vector<uint64_t> stranded;
    for (auto& [token, p] : self_->state.pending)
      if (p.replica == r) stranded.push_back(token);
    self_->state.outstanding[r] = 0;
    const caf::error lost = make_actor_error(ActorErrc::remote_unavailable,
                                             "replica " + replica.label + " was lost: " + why);
    for (uint64_t token : stranded) {
      Pending& p = self_->state.pending.at(token);
      p.attempt_id = 0;  // its reply, if any, is now stale
      p.replica = no_replica;
      retry_or_fail(token, lost, r);
    }
    if (!replica.endpoint.empty()) schedule_reconnect(r);
  }

  void schedule_reconnect(size_t r) {
    self_->delayed_send(self_, remote_.reconnect_interval, reconnect_atom::value, r);
  }

  void retry_later(size_t r) {
    self_->state.connecting[r] = false;
    schedule_reconnect(r);
  }

  void restore(size_t r, model_actor actor) {
    self_->state.connecting[r] = false;
    if (!actor) {
      schedule_reconnect(r);
      return;
    }
    self_->monitor(actor);
    remote_.replicas[r].actor = std::move(actor);
    self_->state.outstanding[r] = 0;
    ++remote_.counters.reconnects;
  }

  void deliver(uint64_t token, NamedTensors& outputs) {
    Pending& p = self_->state.pending.at(token);
    try {
      detail::RequestState& st = *p.msg.state;
      const size_t n = ctx_->outputs.size();
      st.model_outputs.assign(n, Tensor());  // written here; nothing left for postprocess
      for (size_t i = 0; i < n; ++i) {
        const ValueInfo& info = ctx_->outputs[i];
        auto it = outputs.find(info.name);
        if (it == outputs.end())
          throw ExecutionError("replica " + remote_.replicas[p.replica].label +
                               " returned no output '" + info.name + "'");
        const Tensor& produced = it->second;
        if (!info.shape.accepts(produced.shape()) || produced.element_type() != info.type)
          throw ExecutionError("replica " + remote_.replicas[p.replica].label + " returned " +
                               wire::describe_tensor(produced) + " for output '" + info.name +
                               "' declared " + std::string(to_string(info.type)) +
                               info.shape.to_string());
        Tensor& caller = st.outputs[i];
        if (i < st.caller_output.size() && st.caller_output[i]) {
          if (caller.shape() != produced.shape())
            throw TensorMismatch("output '" + info.name + "': tensor of shape " +
                                 caller.shape().to_string() + " cannot hold the result of shape " +
                                 produced.shape().to_string());
          produced.copy_to(caller);
        } else {
          caller = produced;  // the received buffer itself: no copy
        }
      }
    } catch (...) {
      p.msg.error = std::current_exception();
    }
    complete(token);
  }

  void fail(uint64_t token, std::exception_ptr error) {
    self_->state.pending.at(token).msg.error = std::move(error);
    complete(token);
  }

  void complete(uint64_t token) {
    auto node = self_->state.pending.extract(token);
    Pending& p = node.mapped();
    auto& span = p.msg.trace.stages[static_cast<size_t>(detail::Stage::execute)];
    span.worker = p.replica == no_replica ? -1 : static_cast<int32_t>(p.replica);
    finish(std::move(p.msg));
  }

  void finish(request_msg msg) {
    auto& span = msg.trace.stages[static_cast<size_t>(detail::Stage::execute)];
    span.end_ns = detail::now_ns();
    batch_msg out;
    out.requests.push_back(std::move(msg));
    self_->send(next_->postprocess, stage_atom::value, std::move(out));
  }

  Self* self_;
  Context ctx_;
  Handles next_;
  RemoteReplicas& remote_;
};

caf::behavior router_stage(Self* self, Context ctx, Handles next) {
  auto router = std::make_shared<Router>(self, std::move(ctx), std::move(next));
  self->set_down_handler([router](caf::down_msg& down) { router->on_down(down); });
  return {
      [router](stage_atom, batch_msg& batch) { router->route(batch); },
      [router](reconnect_atom, size_t r) { router->reconnect(r); },
  };
}

}  // namespace

caf::actor spawn_router_stage(caf::actor_system& system, Context ctx, Handles next) {
  return system.spawn(router_stage, std::move(ctx), std::move(next));
}

}  // namespace troupe::actors
