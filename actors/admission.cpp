// Admission: the pipeline's ingress. It keeps at most `max_in_flight` requests inside the stages
// (credits) and parks the rest in arrival order; a credit comes back when a request leaves
// postprocess. Parked requests that get cancelled complete without entering the stages.

#include <deque>

#include "actors/stage.hpp"

namespace troupe::actors {

struct AdmissionState {
  int credits = 0;
  bool draining = false;
  std::deque<request_msg> parked;
};

namespace {
void complete_now(PipelineContext& ctx, const StageHandles& next, caf::event_based_actor* self,
                  request_msg msg, const char* why) {
  if (!msg.error) msg.error = std::make_exception_ptr(Cancelled(why));
  self->send(next.completion, complete_atom::value, std::move(msg));
  ctx.in_flight.release();
}
}  // namespace

namespace {
caf::behavior admission_actor(caf::stateful_actor<AdmissionState>* self, Context ctx,
                              Handles next) {
  self->state.credits = ctx->config.max_in_flight;
  auto admit = [self, ctx, next](request_msg msg) {
    if (msg.state->cancel_requested.load()) {
      complete_now(*ctx, *next, self, std::move(msg), "infer request was cancelled");
      return;
    }
    --self->state.credits;
    self->send(next->preprocess, stage_atom::value, std::move(msg));
  };
  return {
      [self, ctx, next, admit](submit_atom, request_msg msg) {
        if (self->state.draining)
          complete_now(*ctx, *next, self, std::move(msg),
                       "infer request was cancelled: its compiled model was destroyed");
        else if (self->state.credits > 0 && self->state.parked.empty())
          admit(std::move(msg));
        else
          self->state.parked.push_back(std::move(msg));
      },
      [self, admit](credit_atom) {
        ++self->state.credits;
        while (self->state.credits > 0 && !self->state.parked.empty()) {
          request_msg msg = std::move(self->state.parked.front());
          self->state.parked.pop_front();
          admit(std::move(msg));
        }
      },
      [self, ctx, next](drain_atom) {
        self->state.draining = true;
        while (!self->state.parked.empty()) {
          request_msg msg = std::move(self->state.parked.front());
          self->state.parked.pop_front();
          complete_now(*ctx, *next, self, std::move(msg),
                       "infer request was cancelled: its compiled model was destroyed");
        }
      },
  };
}
}  // namespace

void submit_request(PipelineContext& ctx, const caf::actor& admission,
                    std::shared_ptr<detail::RequestState> state) {
  ctx.in_flight.acquire();
  request_msg msg;
  msg.id = ctx.next_request_id++;
  msg.state = std::move(state);
  msg.trace.submitted_ns = detail::now_ns();
  caf::anon_send(admission, submit_atom::value, std::move(msg));
}

caf::actor spawn_admission(caf::actor_system& system, Context ctx, Handles next) {
  return system.spawn(admission_actor, std::move(ctx), std::move(next));
}

}  // namespace troupe::actors
