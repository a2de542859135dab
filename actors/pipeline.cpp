#include "actors/pipeline.hpp"

#include <thread>

#include "actors/caller_runs_unit.hpp"
#include "actors/front_actor.hpp"
#include "actors/router_stage.hpp"
#include "actors/stage.hpp"

namespace troupe::actors {

struct Pipeline::Actors {
  caf::actor_system& system;
  std::shared_ptr<StageHandles> handles;
};

Pipeline::Pipeline(caf::actor_system& system, std::shared_ptr<void> system_owner,
                   std::shared_ptr<PipelineContext> context)
    : actors_(std::make_unique<Actors>(Actors{system, std::make_shared<StageHandles>()})),
      context_(std::move(context)),
      system_owner_(std::move(system_owner)) {
  auto& h = *actors_->handles;
  Handles next = actors_->handles;
  h.scheduler = spawn_scheduler(system, context_, next);
  h.preprocess = system.spawn(preprocess_stage, context_, next);
  if (context_->remote) {
    // A remote-backed model: the router stands in for upload, execute and download.
    h.upload = spawn_router_stage(system, context_, next);
    h.download = h.upload;
  } else {
    h.upload = spawn_upload_stage(system, context_, next);
    for (int s = 0; s < context_->config.executor_streams(); ++s)
      h.execute.push_back(spawn_execute_stage(system, context_, next, s));
    h.download = system.spawn(download_stage, context_, next);
  }
  h.postprocess = system.spawn(postprocess_stage, context_, next);
  h.completion = spawn_completion_actor(system, context_, next);
  h.front = caf::actor_cast<caf::actor>(spawn_front_actor(system, context_, next));
}

namespace {

void shut_down(const std::shared_ptr<PipelineContext>& context,
               const std::shared_ptr<StageHandles>& h) {
  caf::anon_send(h->scheduler, drain_atom::value);
  context->in_flight.wait_idle();
  // The completion actor quits after delivering everything queued before this message, then
  // tells the front actor to answer its leftovers and quit.
  caf::anon_send(h->completion, drain_atom::value);
  for (const caf::actor& a : {h->scheduler, h->preprocess, h->upload, h->download, h->postprocess})
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  for (const caf::actor& a : h->execute) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

}  // namespace

Pipeline::~Pipeline() {
  auto context = context_;
  auto handles = actors_->handles;
  if (on_callback_thread() || stage_running_callbacks()) {
    // Destroyed from a user callback: blocking here would stall the completion actor (or the
    // stage running the callback, whose request is still counted in flight) that the requests
    // still in flight need, so the drain finishes on a thread of its own, which also keeps the
    // actor system alive (its destructor must not run on one of its own actors).
    std::thread([context, handles, owner = system_owner_] {
      shut_down(context, handles);
    }).detach();
  } else {
    shut_down(context, handles);
  }
}

void Pipeline::submit(std::shared_ptr<detail::RequestState> state, bool caller_waits) {
  // A request alone in the pipeline, submitted by a thread that would only wait for it (a
  // synchronous infer, or a completion callback starting the next request, after which the
  // completion thread has nothing else to do): that thread takes it through the scheduler,
  // preprocess and upload itself (actors/caller_runs_unit.hpp) instead of waking a worker for
  // them. Where execute runs on the scheduler's workers (a small model, CompileConfig::
  // execute_on_scheduler), it takes the request the whole way, with no wake-up at all: execute,
  // download, postprocess, then upload and the scheduler again for the slot and the credit they
  // return. `troupe bench -hint latency -nthreads 1` on the ONNX MLP of benchmarks/models (Zen 4,
  // 2 vCPUs): 68-75 -> 19 us; a keyword-spotting TC-ResNet 81 -> 31 us. From a callback, only
  // when no other completion waits for the callback thread: their callbacks would wait for this
  // whole run, and with a few requests in flight that thread came to run them all in turn (a
  // keyword-spotting DS-CNN under the throughput hint: 26 k instead of 31 k requests/s). An
  // asynchronous submission from any other thread returns at once, however long preprocessing
  // takes, and with others in flight the workers do the stages, so that callbacks of other requests
  // are not held up. A remote model's router talks to the network: never here.
  if (caf::execution_unit* stage = stage_running_callbacks()) {
    // From a callback run by the stage that finished its request (CALLBACK_THREAD=STAGE): sent
    // from that stage's unit, so the worker takes it next instead of waking another.
    submit_request(*context_, actors_->handles->scheduler, std::move(state), stage);
    return;
  }
  const bool caller_runs = (caller_waits || on_callback_thread()) && !context_->remote &&
                           context_->in_flight.count() == 0;
  if (!caller_runs) {
    submit_request(*context_, actors_->handles->scheduler, std::move(state));
    return;
  }
  const bool whole_way = context_->config.execute_on_scheduler && !callbacks_waiting();
  const size_t turns = whole_way ? 8 : 3;
  CallerRunsUnit unit(actors_->system);
  submit_request(*context_, actors_->handles->scheduler, std::move(state), &unit);
  unit.run(turns);
}

void Pipeline::cancel_waiting() {
  caf::anon_send(actors_->handles->scheduler, cancel_atom::value);
}

void Pipeline::reconfigure(const detail::SchedulingPolicy& policy) {
  caf::anon_send(actors_->handles->scheduler, reconfigure_atom::value, policy);
}

void Pipeline::set_active_streams(int streams) {
  caf::anon_send(actors_->handles->upload, streams_atom::value, streams);
  caf::anon_send(actors_->handles->scheduler, streams_atom::value, streams);
}

caf::actor Pipeline::front() const {
  return actors_->handles->front;
}

const std::shared_ptr<PipelineContext>& Pipeline::context() const {
  return context_;
}

}  // namespace troupe::actors
