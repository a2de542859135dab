#pragma once

#include <memory>
#include <vector>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "actors/pipeline_context.hpp"
#include "engine/graph/clock.hpp"
#include "troupe/error.hpp"

namespace troupe::actors {

/// Handles of every actor of one pipeline. Filled once after all are spawned and before the first
/// request is submitted; read-only afterwards.
struct StageHandles {
  caf::actor scheduler, preprocess, upload, download, postprocess, completion, front;
  std::vector<caf::actor> execute;  // one per stream
};

using Context = std::shared_ptr<PipelineContext>;
using Handles = std::shared_ptr<const StageHandles>;

/// The error a request fails with when `error` escaped its `stage`: a troupe::Error as it is, and
/// anything else (std::bad_alloc from an allocation, a library's std::exception, a test hook's
/// injection) as an ExecutionError naming the stage and what was thrown, so every caller catches
/// one hierarchy.
std::exception_ptr stage_error(detail::Stage stage, std::exception_ptr error);

/// Sends a batch on to the next actor, as an urgent message when it is one.
template <class Atom>
void send_batch(caf::event_based_actor* self, const caf::actor& to, Atom atom, batch_msg&& batch) {
  if (batch.urgent)
    self->send<caf::message_priority::high>(to, atom, std::move(batch));
  else
    self->send(to, atom, std::move(batch));
}

/// Runs `work` for a request that has not failed, stamping the stage span around it and turning any
/// exception into the request's error. The thread's CPU time is a system call (two per stage and
/// request, measurable on a small model), so it is taken only when profiling (PERF_COUNT).
template <class Work>
void timed_stage(detail::Stage stage, request_msg& msg, int32_t worker, bool measure_cpu,
                 Work&& work) {
  detail::StageSpan& span = msg.trace.stages[static_cast<size_t>(stage)];
  span.start_ns = detail::now_ns();
  const int64_t cpu0 = measure_cpu ? detail::thread_cpu_ns() : 0;
  span.worker = worker;
  if (!msg.error) {
    try {
      work();
    } catch (...) {
      msg.error = stage_error(stage, std::current_exception());
    }
  }
  span.cpu_ns = measure_cpu ? detail::thread_cpu_ns() - cpu0 : 0;
  span.end_ns = detail::now_ns();
}

/// Runs one stage's work for a request: stamps the stage span, honours cancellation, runs the test
/// hook and turns any exception into the request's error (the stage itself never fails).
template <class Work>
void run_stage(PipelineContext& ctx, detail::Stage stage, request_msg& msg, Work&& work,
               int32_t worker = 0) {
  timed_stage(stage, msg, worker, ctx.config.enable_profiling, [&] {
    if (msg.state->cancel_requested.load(std::memory_order_relaxed))
      throw Cancelled("infer request was cancelled");
    if (ctx.hook) ctx.hook(stage, msg.id);
    work();
  });
}

/// Sends `xs` to `to` as an actor running on `unit` sends (its context()), or as anon_send does
/// with a null unit: an actor's send is one troupe's scheduler policy need not wake another worker
/// for (engine/runtime/deferred_wake_sharing.hpp). Call it on the thread running `unit`.
template <class... Ts>
void send_from(caf::execution_unit* unit, const caf::actor& to, Ts&&... xs) {
  to->enqueue(
      caf::make_mailbox_element(nullptr, caf::make_message_id(), {}, std::forward<Ts>(xs)...),
      unit);
}

/// The end of a batch's way (completion_actor.cpp): when no request runs user code on completion
/// (no callback) and none must wait for earlier ones (no preserve_ordering), `self`, the stage
/// that finished it, completes the requests and returns the credit, saving the wake-up of the
/// detached completion actor; otherwise the batch goes to that actor. Used by postprocess and by
/// the scheduler's refusals.
void finish_batch(caf::event_based_actor* self, PipelineContext& ctx, const StageHandles& next,
                  batch_msg&& batch);

// The stage actors, one file each.
caf::actor spawn_scheduler(caf::actor_system& system, Context ctx, Handles next);
caf::behavior preprocess_stage(caf::event_based_actor* self, Context ctx, Handles next);
caf::actor spawn_upload_stage(caf::actor_system& system, Context ctx, Handles next);
caf::actor spawn_execute_stage(caf::actor_system& system, Context ctx, Handles next, int stream);
caf::behavior download_stage(caf::event_based_actor* self, Context ctx, Handles next);
caf::behavior postprocess_stage(caf::event_based_actor* self, Context ctx, Handles next);
caf::actor spawn_completion_actor(caf::actor_system& system, Context ctx, Handles next);

/// Sends a request (already marked busy by its owner) to the scheduler: counts it in flight, gives
/// it an id and stamps its submission time. Used by InferRequest (via Pipeline) and the front
/// actor. `sender`: the execution unit of the actor sending (its context()), if any, so that the
/// message is an actor's send, which the scheduler policy need not wake another worker for.
void submit_request(PipelineContext& ctx, const caf::actor& scheduler,
                    std::shared_ptr<detail::RequestState> state,
                    caf::execution_unit* sender = nullptr);

/// True on the thread of the completion actor (where user callbacks run).
bool on_callback_thread();
/// True on that thread when more completions wait for it (their callbacks).
bool callbacks_waiting();
/// The execution unit of a stage running its requests' callbacks on this thread
/// (CALLBACK_THREAD=STAGE), or null.
caf::execution_unit* stage_running_callbacks();

}  // namespace troupe::actors
