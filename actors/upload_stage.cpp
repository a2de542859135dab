// Upload: assigns each request of a batch an execute slot (the buffers of one stream; the whole
// batch on the same stream) and copies its inputs into them, converting those the stream keeps
// blocked into that layout. Batches wait here, in order, while no stream has room; download
// returns slots.

#include <algorithm>
#include <deque>

#include "actors/stage.hpp"
#include "actors/tensor_checks.hpp"
#include "kernels/layout_conversion.hpp"

namespace troupe::actors {

struct UploadState {
  std::vector<int> free_slots;
  std::vector<int> busy_per_stream;   // slots taken per stream
  std::deque<batch_msg> waiting;      // batches that found no stream with enough free slots
  std::deque<batch_msg> waiting_top;  // the same for the top priority level's stream
  int active_streams = 0;             // streams that take new batches (the first ones)
  int next_stream = 0;                // where the round-robin among equally loaded streams resumes
};

namespace {

// The stream for a batch of `k` requests: the one with the fewest slots taken among those with
// `k` free slots, so streams share the load; ties go round-robin, so requests that arrive one at a
// time still use every stream. -1 when none has room.
int choose_stream(UploadState& st, const PipelineContext& ctx, int k) {
  const int streams = st.active_streams;
  int best = -1;
  for (int i = 0; i < streams; ++i) {
    const int s = (st.next_stream + i) % streams;
    if (ctx.config.slots_per_stream - st.busy_per_stream[s] >= k &&
        (best < 0 || st.busy_per_stream[s] < st.busy_per_stream[best]))
      best = s;
  }
  if (best >= 0) st.next_stream = (best + 1) % streams;
  return best;
}

// The top priority level's own stream (after the others) when it has room for `k` requests, else
// -1.
int top_stream_with_room(const UploadState& st, const PipelineContext& ctx, int k) {
  const int top = ctx.config.num_streams;
  return ctx.config.slots_per_stream - st.busy_per_stream[static_cast<size_t>(top)] >= k ? top : -1;
}

int take_slot(UploadState& st, const PipelineContext& ctx, int stream) {
  for (size_t i = 0; i < st.free_slots.size(); ++i) {
    const int slot = st.free_slots[i];
    if (ctx.slots[static_cast<size_t>(slot)].stream != stream) continue;
    st.free_slots.erase(st.free_slots.begin() + static_cast<std::ptrdiff_t>(i));
    ++st.busy_per_stream[static_cast<size_t>(stream)];
    return slot;
  }
  return -1;
}

void upload(PipelineContext& ctx, request_msg& msg) {
  ExecuteSlot& slot = ctx.slots[static_cast<size_t>(msg.slot)];
  run_stage(ctx, detail::Stage::upload, msg, [&] {
    const auto& src = msg.state->model_inputs;
    slot.inputs.resize(src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      const kernels::TensorLayout layout = ctx.graph_input_layouts[i];
      ensure_buffer(slot.inputs[i], layout.bf16 ? ElementType::bf16 : src[i].element_type(),
                    src[i].shape());
      if (layout.is_plain())
        src[i].copy_to(slot.inputs[i]);
      else  // into the layout (and bf16 when so) the stream's first kernels read
        kernels::convert_layout(src[i].is_contiguous() ? src[i] : src[i].contiguous(), {},
                                slot.inputs[i], layout);
    }
  });
}

bool failed(const request_msg& msg) {
  return msg.error || msg.state->cancel_requested.load();
}

// Sends on the waiting batches, in order, until one finds no room.
template <class PassFailed, class TryProcess>
void process_waiting(std::deque<batch_msg>& waiting, PassFailed& pass_failed,
                     TryProcess& try_process) {
  while (!waiting.empty()) {
    batch_msg& head = waiting.front();
    pass_failed(head);  // cancelled while waiting
    if (!head.requests.empty() && !try_process(head)) break;
    waiting.pop_front();
  }
}

}  // namespace

namespace {
caf::behavior upload_stage(caf::stateful_actor<UploadState>* self, Context ctx, Handles next) {
  for (size_t i = 0; i < ctx->slots.size(); ++i)
    self->state.free_slots.push_back(static_cast<int>(i));
  self->state.busy_per_stream.assign(static_cast<size_t>(ctx->config.executor_streams()), 0);
  self->state.active_streams = ctx->config.num_streams;

  // Requests with nothing to execute go straight to download (the stage stamped, a cancel turned
  // into the error); the others leave the batch for later.
  auto pass_failed = [self, ctx, next](batch_msg& batch) {
    batch_msg out;
    std::vector<request_msg> good;
    for (request_msg& msg : batch.requests) {
      if (failed(msg)) {
        run_stage(*ctx, detail::Stage::upload, msg, [] {});
        out.requests.push_back(std::move(msg));
      } else {
        good.push_back(std::move(msg));
      }
    }
    batch.requests = std::move(good);
    out.urgent = batch.urgent;
    if (!out.requests.empty()) send_batch(self, next->download, stage_atom::value, std::move(out));
  };
  // Uploads the batch into slots of one stream and sends it to that stream's execute; false when
  // no stream has room (nothing done).
  auto try_process = [self, ctx, next](batch_msg& batch) {
    const int k = static_cast<int>(batch.requests.size());
    const int stream = batch.top_stream ? top_stream_with_room(self->state, *ctx, k)
                                        : choose_stream(self->state, *ctx, k);
    if (stream < 0) return false;
    batch_msg failed_copies;
    failed_copies.urgent = batch.urgent;
    std::vector<request_msg> good;
    for (request_msg& msg : batch.requests) {
      msg.slot = take_slot(self->state, *ctx, stream);
      upload(*ctx, msg);
      (msg.error ? failed_copies.requests : good).push_back(std::move(msg));
    }
    if (!failed_copies.requests.empty())
      send_batch(self, next->download, stage_atom::value, std::move(failed_copies));
    if (!good.empty()) {
      batch.requests = std::move(good);
      send_batch(self, next->execute[static_cast<size_t>(stream)], stage_atom::value,
                 std::move(batch));
    }
    return true;
  };

  return {
      [self, pass_failed, try_process](stage_atom, batch_msg& batch) {
        pass_failed(batch);
        if (batch.requests.empty()) return;
        if (batch.top_stream) {  // its own stream: no other batch is in its way
          if (!self->state.waiting_top.empty() || !try_process(batch))
            self->state.waiting_top.push_back(std::move(batch));
          return;
        }
        // In order: a batch never overtakes one that waits for slots, except that an urgent one
        // overtakes the ordinary ones.
        auto& waiting = self->state.waiting;
        const auto place = batch.urgent ? std::find_if(waiting.begin(), waiting.end(),
                                                       [](const batch_msg& w) { return !w.urgent; })
                                        : waiting.end();
        if (place != waiting.begin() || !try_process(batch))
          waiting.insert(place, std::move(batch));
      },
      [self, ctx, pass_failed, try_process](release_atom, const std::vector<int32_t>& slots) {
        for (int32_t slot : slots) {
          --self->state.busy_per_stream[ctx->slots[static_cast<size_t>(slot)].stream];
          self->state.free_slots.push_back(slot);
        }
        process_waiting(self->state.waiting_top, pass_failed, try_process);
        process_waiting(self->state.waiting, pass_failed, try_process);
      },
      [self, ctx, pass_failed, try_process](streams_atom, int streams) {
        self->state.active_streams = std::clamp(streams, 1, ctx->config.num_streams);
        process_waiting(self->state.waiting, pass_failed, try_process);  // more streams: room now
      },
  };
}
}  // namespace

caf::actor spawn_upload_stage(caf::actor_system& system, Context ctx, Handles next) {
  return system.spawn(upload_stage, std::move(ctx), std::move(next));
}

}  // namespace troupe::actors
