// Scheduler: the pipeline's ingress and its dynamic batcher. Requests wait here in priority
// queues (actors/batch_queue.hpp decides); a batch enters the stages when one of the scheduler's
// credits is free, so requests accumulate while the streams are busy and leave together. A credit
// comes back once the batch has completed (after its callbacks). Without batching a credit is one
// request and the queue is plain FIFO, which is the admission control the pipeline always had.
//
// Refusals never enter the stages: a full queue (QueueFull), a timeout with action REJECT
// (RequestTimeout), a priority out of range (InvalidArgument), cancellation while waiting and
// shutdown complete the request at once, here when it runs no user code on completion, else
// through the completion actor.

#include <algorithm>
#include <functional>
#include <unordered_map>

#include "actors/batch_queue.hpp"
#include "actors/batch_size_tuner.hpp"
#include "actors/stage.hpp"

namespace troupe::actors {

struct SchedulerState {
  explicit SchedulerState() : queue(detail::SchedulingPolicy{}) {}
  int credits = 0;       // batches the scheduler may still let in (negative after a cut)
  int credit_total = 0;  // credits there are in all, free or with a batch in the stages
  int top_credits = 0;   // the top priority level's stream: free (1) or with a batch (0)
  bool draining = false;
  BatchQueue queue;
  BatchSizeTuner tuner;  // the batch size limit, with adaptive_batch_size
  std::unordered_map<uint64_t, request_msg> waiting;  // the queued requests, by id
  int64_t timer_at = 0;                               // when the pending tick fires (0: none)
};

namespace {

using SchedulerActor = caf::stateful_actor<SchedulerState>;

void complete_now(PipelineContext& ctx, const StageHandles& next, caf::event_based_actor* self,
                  request_msg msg, std::exception_ptr error) {
  if (!msg.error) msg.error = std::move(error);
  batch_msg batch;
  batch.requests.push_back(std::move(msg));
  finish_batch(self, ctx, next, std::move(batch));
  ctx.in_flight.release();
}

void cancel_now(PipelineContext& ctx, const StageHandles& next, caf::event_based_actor* self,
                request_msg msg, const char* why) {
  complete_now(ctx, next, self, std::move(msg), std::make_exception_ptr(Cancelled(why)));
}

// Requests merge only with requests whose inputs have the same shapes and types.
uint64_t shape_key(const detail::RequestState& state) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (const Tensor& t : state.inputs) {
    mix(static_cast<uint64_t>(t.element_type()));
    mix(t.shape().rank());
    for (int64_t d : t.shape().dims()) mix(static_cast<uint64_t>(d));
  }
  return h;
}

// Releases what the policy says may run, refuses what timed out, and sets the timer for the next
// moment something can change.
void dispatch(SchedulerActor* self, PipelineContext& ctx, const StageHandles& next) {
  auto& st = self->state;
  const int64_t now = detail::now_ns();
  for (uint64_t id : st.queue.expire(now)) {
    auto it = st.waiting.find(id);
    request_msg msg = std::move(it->second);
    st.waiting.erase(it);
    auto error = std::make_exception_ptr(
        RequestTimeout("infer request timed out after waiting " +
                       std::to_string((now - msg.trace.submitted_ns) / 1000) +
                       " us in the scheduler's queue (timeout_action REJECT)"));
    complete_now(ctx, next, self, std::move(msg), std::move(error));
  }
  const auto& policy = st.queue.policy();
  const int limit = policy.adaptive_batch_size ? st.tuner.next_limit() : 0;
  while (st.credits > 0 || st.top_credits > 0) {
    // The top level's stream takes a batch only when every other stream is busy, and only of
    // requests that asked for the top level; it does not wait for a batch to fill.
    const bool top_stream = st.credits <= 0;
    std::vector<uint64_t> ids =
        top_stream ? st.queue.next_top_level_batch(limit) : st.queue.next_batch(now, limit);
    if (ids.empty()) break;
    batch_msg batch;
    for (uint64_t id : ids) {
      auto it = st.waiting.find(id);
      request_msg msg = std::move(it->second);
      st.waiting.erase(it);
      if (msg.state->cancel_requested.load())
        cancel_now(ctx, next, self, std::move(msg), "infer request was cancelled");
      else
        batch.requests.push_back(std::move(msg));
    }
    batch.urgent =
        std::any_of(batch.requests.begin(), batch.requests.end(),
                    [&](const request_msg& m) { return policy.is_top_level(m.state->priority); });
    if (batch.requests.empty()) continue;
    batch.top_stream = top_stream;
    Credit& credit = batch.requests.front().credit;
    credit = {static_cast<int32_t>(batch.requests.size()), now};
    credit.top_stream = top_stream;
    --(top_stream ? st.top_credits : st.credits);
    send_batch(self, next.preprocess, stage_atom::value, std::move(batch));
  }
  const int64_t wake = st.queue.next_event(st.credits > 0);
  if (wake > 0 && (st.timer_at == 0 || wake < st.timer_at)) {
    st.timer_at = wake;
    const int64_t in_ns = std::max<int64_t>(wake - now, 1000);
    self->delayed_send(self, std::chrono::nanoseconds(in_ns), tick_atom::value, wake);
  }
}

caf::behavior scheduler_actor(SchedulerActor* self, Context ctx, Handles next) {
  self->state.credits = self->state.credit_total = ctx->config.scheduler_credits;
  // A remote-backed model's replicas own their streams: it has no top level's stream here.
  self->state.top_credits = ctx->config.scheduling.top_priority_stream && !ctx->remote ? 1 : 0;
  self->state.queue.set_policy(ctx->config.scheduling);
  self->state.tuner = BatchSizeTuner(ctx->config.scheduling.max_batch_size);
  return {
      [self, ctx, next](submit_atom, request_msg msg) {
        auto& st = self->state;
        if (st.draining) {
          cancel_now(*ctx, *next, self, std::move(msg),
                     "infer request was cancelled: its compiled model was destroyed");
          return;
        }
        if (msg.state->cancel_requested.load()) {
          cancel_now(*ctx, *next, self, std::move(msg), "infer request was cancelled");
          return;
        }
        QueuedRequest queued;
        try {
          const auto& policy = st.queue.policy();
          queued.level = policy.level_of(msg.state->priority);
          const int64_t timeout_us = detail::SchedulingPolicy::timeout_under(
              st.queue.queue_policy(queued.level), msg.state->timeout_us);
          queued.deadline_ns = timeout_us > 0 ? msg.trace.submitted_ns + timeout_us * 1000 : 0;
        } catch (...) {
          complete_now(*ctx, *next, self, std::move(msg), std::current_exception());
          return;
        }
        queued.id = msg.id;
        queued.arrival_ns = msg.trace.submitted_ns;
        queued.shape_key = shape_key(*msg.state);
        if (!st.queue.push(queued)) {
          const std::string why =
              "queue full: " + std::to_string(st.queue.size(queued.level)) +
              " requests already wait at priority level " + std::to_string(queued.level + 1) +
              " (max_queue_size " +
              std::to_string(st.queue.queue_policy(queued.level).max_queue_size) + ")";
          complete_now(*ctx, *next, self, std::move(msg), std::make_exception_ptr(QueueFull(why)));
          return;
        }
        st.waiting.emplace(msg.id, std::move(msg));
        dispatch(self, *ctx, *next);
      },
      [self, ctx, next](credit_atom, const Credit& credit) {
        auto& st = self->state;
        // A run that built a shape specialization (a batch size's first on its stream) would make
        // its size look far dearer than it is; one on the top level's stream ran beside the others.
        if (st.queue.policy().adaptive_batch_size && !credit.cold && !credit.top_stream)
          st.tuner.record(credit.batch_size, detail::now_ns() - credit.released_ns);
        ++(credit.top_stream ? st.top_credits : st.credits);
        dispatch(self, *ctx, *next);
      },
      [self, ctx, next](cancel_atom) {
        auto& st = self->state;
        for (auto it = st.waiting.begin(); it != st.waiting.end();) {
          if (it->second.state->cancel_requested.load() && st.queue.remove(it->first)) {
            request_msg msg = std::move(it->second);
            it = st.waiting.erase(it);
            cancel_now(*ctx, *next, self, std::move(msg), "infer request was cancelled");
          } else {
            ++it;
          }
        }
      },
      [self, ctx, next](tick_atom, int64_t at) {
        if (at == self->state.timer_at) self->state.timer_at = 0;
        dispatch(self, *ctx, *next);
      },
      [self, ctx, next](streams_atom, int streams) {
        // With a credit per stream (batching or queue policies), fewer streams mean fewer batches
        // let in, so requests keep waiting here, where priorities and batching apply. A credit
        // still out with a batch is not returned to use until the count allows it again. With
        // FIFO admission the credits bound requests in flight, whatever the streams.
        if (!ctx->config.credit_per_stream) return;
        auto& st = self->state;
        st.credits += streams - st.credit_total;
        st.credit_total = streams;
        dispatch(self, *ctx, *next);
      },
      [self, ctx, next](reconfigure_atom, const detail::SchedulingPolicy& policy) {
        // What was measured under another max_batch_size still holds for the sizes both allow,
        // but the buckets differ: the tuner starts over (small models find their size again
        // within a few dozen batches).
        if (policy.max_batch_size != self->state.queue.policy().max_batch_size)
          self->state.tuner = BatchSizeTuner(policy.max_batch_size);
        self->state.queue.set_policy(policy);
        self->state.timer_at = 0;  // the delay may have changed: the next dispatch sets it anew
        dispatch(self, *ctx, *next);
      },
      [self, ctx, next](drain_atom) {
        auto& st = self->state;
        st.draining = true;
        for (uint64_t id : st.queue.take_all()) {
          auto it = st.waiting.find(id);
          request_msg msg = std::move(it->second);
          st.waiting.erase(it);
          cancel_now(*ctx, *next, self, std::move(msg),
                     "infer request was cancelled: its compiled model was destroyed");
        }
      },
  };
}

}  // namespace

void submit_request(PipelineContext& ctx, const caf::actor& scheduler,
                    std::shared_ptr<detail::RequestState> state, caf::execution_unit* sender) {
  ctx.in_flight.acquire();
  request_msg msg;
  msg.id = ctx.next_request_id++;
  msg.state = std::move(state);
  msg.trace.submitted_ns = detail::now_ns();
  send_from(sender, scheduler, submit_atom::value, std::move(msg));
}

caf::actor spawn_scheduler(caf::actor_system& system, Context ctx, Handles next) {
  return system.spawn(scheduler_actor, std::move(ctx), std::move(next));
}

}  // namespace troupe::actors
