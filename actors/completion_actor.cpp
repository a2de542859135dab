// Completion: the last actor a request with a user callback visits. It records the request's
// trace, marks it done, wakes waiters and runs the caller's callback. It is spawned detached, so a
// slow or blocking user callback delays only other callbacks, never a stage; an exception from a
// callback is swallowed. A batch that runs no user code when it completes is completed by the
// stage that finished it instead: see finish_batch.

#include <map>

#include "actors/caller_runs_unit.hpp"
#include "actors/stage.hpp"

namespace troupe::actors {

namespace {
// The completion actor whose thread this is (null on any other thread).
thread_local caf::scheduled_actor* completion_on_this_thread = nullptr;
}  // namespace

bool on_callback_thread() {
  return completion_on_this_thread != nullptr;
}

bool callbacks_waiting() {
  return completion_on_this_thread && !completion_on_this_thread->mailbox().empty();
}

namespace {
// The execution unit of the stage completing requests on this thread, while it runs their
// callbacks (CALLBACK_THREAD=STAGE); null otherwise.
thread_local caf::execution_unit* completing_stage = nullptr;
}  // namespace

caf::execution_unit* stage_running_callbacks() {
  return completing_stage;
}

namespace {

bool completes_in_stage(const PipelineContext& ctx, const batch_msg& batch) {
  if (ctx.config.scheduling.preserve_ordering) return false;
  if (ctx.config.callbacks_on_stage) return true;
  for (const request_msg& msg : batch.requests) {
    std::lock_guard<std::mutex> lock(msg.state->mutex);
    if (msg.state->callback && !msg.state->callback_disabled) return false;
  }
  return true;
}

// The credit a batch carries back to the scheduler (batch_size 0: none).
Credit credit_of(const batch_msg& batch) {
  for (const request_msg& msg : batch.requests)
    if (msg.credit.batch_size > 0) return msg.credit;
  return {};
}

// Completion of one request: its trace recorded, marked done, waiters woken, the internal hook
// (given `unit`, the execution unit completing it, for the message it sends) and the user
// callback run.
void complete(PipelineContext& ctx, request_msg& msg, caf::execution_unit* unit = nullptr) {
  detail::RequestState& st = *msg.state;
  msg.trace.run_id = msg.id;
  msg.trace.completed_ns = detail::now_ns();
  ctx.stats.record(msg.trace, msg.error != nullptr);
  std::function<void(std::exception_ptr)> callback;
  std::function<void(detail::RequestState&, std::exception_ptr, caf::execution_unit*)> internal;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    st.last_trace = std::move(msg.trace);
    st.error = msg.error;
    st.busy = false;
    ++st.completed_runs;
    if (!st.callback_disabled) callback = st.callback;
    internal = st.on_complete;
    st.callback_running = static_cast<bool>(callback) || static_cast<bool>(internal);
  }
  if (!callback && !internal) {
    st.done_cv.notify_all();
    return;
  }
  if (internal) {
    try {
      internal(st, msg.error, unit);
    } catch (...) {
    }
  }
  if (callback) {
    try {
      callback(msg.error);
    } catch (...) {
      // A throwing callback must not affect the pipeline or other requests.
    }
  }
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    st.callback_running = false;
  }
  st.done_cv.notify_all();
}

struct CompletionState {
  // preserve_ordering: requests finish in id order (the order they were submitted); a request
  // that finishes early waits here for the ones before it. Every id reaches this actor exactly
  // once, so nothing waits forever.
  uint64_t next_id = 1;
  std::map<uint64_t, request_msg> held;
};

}  // namespace

caf::behavior completion_actor(caf::stateful_actor<CompletionState>* self, Context ctx,
                               Handles next) {
  const bool ordered = ctx->config.scheduling.preserve_ordering;
  return {
      [self, ctx, next, ordered](complete_atom, batch_msg& batch) {
        completion_on_this_thread = self;
        const Credit credit = credit_of(batch);
        if (!ordered) {
          for (request_msg& msg : batch.requests) complete(*ctx, msg);
        } else {
          auto& st = self->state;
          for (request_msg& msg : batch.requests) st.held.emplace(msg.id, std::move(msg));
          for (auto it = st.held.begin(); it != st.held.end() && it->first == st.next_id;
               it = st.held.erase(it), ++st.next_id)
            complete(*ctx, it->second);
        }
        // The credit goes back after the callbacks ran: a client that resubmits from its
        // callback (a closed loop, AsyncInferQueue) has its requests queued before the scheduler
        // forms the next batch, rather than one of them leaving alone on the freed credit.
        // The scheduler's turn for it runs on this thread (actors/caller_runs_unit.hpp): a worker
        // woken only to count a credit would take a core from the streams.
        if (credit.batch_size > 0)
          send_and_run_here(self, 1,
                            [&] { self->send(next->scheduler, credit_atom::value, credit); });
      },
      [self, ctx, next](drain_atom) {
        // Every completion queued before this message has been delivered.
        for (auto& [id, msg] : self->state.held) complete(*ctx, msg);
        self->state.held.clear();
        self->send(next->front, drain_atom::value);
        self->quit();
      },
  };
}

void finish_batch(caf::event_based_actor* self, PipelineContext& ctx, const StageHandles& next,
                  batch_msg&& batch) {
  if (!completes_in_stage(ctx, batch)) {
    send_batch(self, next.completion, complete_atom::value, std::move(batch));
    return;
  }
  {
    // A callback that starts a request (STAGE) sends it from this stage's unit: the worker then
    // takes it next instead of waking another (Pipeline::submit).
    struct Scope {
      caf::execution_unit* before = completing_stage;
      ~Scope() { completing_stage = before; }
    } scope;
    completing_stage = self->context();
    for (request_msg& msg : batch.requests) complete(ctx, msg, self->context());
  }
  const Credit credit = credit_of(batch);
  if (credit.batch_size > 0) self->send(next.scheduler, credit_atom::value, credit);
}

caf::actor spawn_completion_actor(caf::actor_system& system, Context ctx, Handles next) {
  return system.spawn<caf::detached>(completion_actor, std::move(ctx), std::move(next));
}

}  // namespace troupe::actors
