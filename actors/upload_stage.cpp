// Upload: assigns the request an execute slot (the buffers of one stream) and copies its inputs
// into them, converting those the stream keeps blocked into that layout. Requests wait here, in
// order, while every slot is taken; download returns slots.

#include <deque>

#include "actors/stage.hpp"
#include "actors/tensor_checks.hpp"
#include "kernels/layout_conversion.hpp"

namespace troupe::actors {

struct UploadState {
  std::vector<int> free_slots;
  std::vector<int> busy_per_stream;
  std::deque<request_msg> waiting;
};

namespace {

// The free slot whose stream has the fewest requests assigned, so streams share the load.
int take_slot(UploadState& st, const PipelineContext& ctx) {
  size_t best = 0;
  for (size_t i = 1; i < st.free_slots.size(); ++i) {
    int a = ctx.slots[st.free_slots[i]].stream, b = ctx.slots[st.free_slots[best]].stream;
    if (st.busy_per_stream[a] < st.busy_per_stream[b]) best = i;
  }
  int slot = st.free_slots[best];
  st.free_slots.erase(st.free_slots.begin() + static_cast<std::ptrdiff_t>(best));
  ++st.busy_per_stream[ctx.slots[slot].stream];
  return slot;
}

}  // namespace

namespace {
caf::behavior upload_stage(caf::stateful_actor<UploadState>* self, Context ctx, Handles next) {
  for (size_t i = 0; i < ctx->slots.size(); ++i)
    self->state.free_slots.push_back(static_cast<int>(i));
  self->state.busy_per_stream.assign(static_cast<size_t>(ctx->config.num_streams), 0);

  auto process = [self, ctx, next](request_msg msg) {
    if (msg.error || msg.state->cancel_requested.load()) {
      // Nothing to execute: stamp the stage (turning a cancel into the error) and go straight on.
      run_stage(*ctx, detail::Stage::upload, msg, [] {});
      self->send(next->download, stage_atom::value, std::move(msg));
      return;
    }
    msg.slot = take_slot(self->state, *ctx);
    ExecuteSlot& slot = ctx->slots[static_cast<size_t>(msg.slot)];
    run_stage(*ctx, detail::Stage::upload, msg, [&] {
      const auto& src = msg.state->model_inputs;
      slot.inputs.resize(src.size());
      for (size_t i = 0; i < src.size(); ++i) {
        const kernels::TensorLayout layout = ctx->graph_input_layouts[i];
        ensure_buffer(slot.inputs[i], layout.bf16 ? ElementType::bf16 : src[i].element_type(),
                      src[i].shape());
        if (layout.is_plain())
          src[i].copy_to(slot.inputs[i]);
        else  // into the layout (and bf16 when so) the stream's first kernels read
          kernels::convert_layout(src[i].is_contiguous() ? src[i] : src[i].contiguous(), {},
                                  slot.inputs[i], layout);
      }
    });
    if (msg.error) {
      self->send(next->download, stage_atom::value, std::move(msg));
      return;
    }
    self->send(next->execute[static_cast<size_t>(slot.stream)], stage_atom::value, std::move(msg));
  };

  return {
      [self, process](stage_atom, request_msg msg) {
        if (self->state.free_slots.empty() && !msg.error && !msg.state->cancel_requested.load())
          self->state.waiting.push_back(std::move(msg));
        else
          process(std::move(msg));
      },
      [self, ctx, process](release_atom, int32_t slot) {
        --self->state.busy_per_stream[ctx->slots[static_cast<size_t>(slot)].stream];
        self->state.free_slots.push_back(slot);
        while (!self->state.free_slots.empty() && !self->state.waiting.empty()) {
          request_msg msg = std::move(self->state.waiting.front());
          self->state.waiting.pop_front();
          process(std::move(msg));
        }
      },
  };
}
}  // namespace

caf::actor spawn_upload_stage(caf::actor_system& system, Context ctx, Handles next) {
  return system.spawn(upload_stage, std::move(ctx), std::move(next));
}

}  // namespace troupe::actors
