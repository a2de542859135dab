// Download: copies the outputs out of the execute slot (converting blocked ones back to plain) and
// returns the slot to upload. Where the
// caller's output tensor already has the graph's type and layout and is dense, it is written
// directly; otherwise into a scratch buffer that postprocess converts.

#include "actors/stage.hpp"
#include "actors/tensor_checks.hpp"
#include "kernels/layout_conversion.hpp"

namespace troupe::actors {

namespace {

const OutputPostprocessing* output_plan_for(const PipelineContext& ctx, size_t i) {
  if (!ctx.pre_post || i >= ctx.pre_post->outputs.size() || !ctx.pre_post->outputs[i])
    return nullptr;
  return &*ctx.pre_post->outputs[i];
}

// The shape the caller sees for a produced output (a layout conversion permutes it).
Shape caller_shape(const OutputPostprocessing* plan, const Shape& produced) {
  return plan ? layout_converted_shape(produced, plan->model_layout, plan->caller_layout)
              : produced;
}

// Copies (or converts) the outputs out of the request's execute slot.
void download(PipelineContext& ctx, request_msg& msg) {
  run_stage(ctx, detail::Stage::download, msg, [&] {
    detail::RequestState& st = *msg.state;
    ExecuteSlot& slot = ctx.slots[static_cast<size_t>(msg.slot)];
    const size_t n = ctx.outputs.size();
    st.model_outputs.resize(n);
    st.output_scratch.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const Tensor& produced = slot.outputs[i];
      const OutputPostprocessing* plan = output_plan_for(ctx, i);
      const Shape wanted = caller_shape(plan, produced.shape());
      Tensor& caller = st.outputs[i];
      const bool caller_set = i < st.caller_output.size() && st.caller_output[i];
      if (!caller_set) {
        // troupe owns this output: (re)allocate it in the caller-facing type and shape.
        ensure_buffer(caller, ctx.outputs[i].type, wanted);
      } else if (caller.shape() != wanted) {
        throw TensorMismatch("output '" + ctx.outputs[i].name + "': tensor of shape " +
                             caller.shape().to_string() + " cannot hold the result of shape " +
                             wanted.to_string());
      }
      const bool direct =
          !plan && caller.element_type() == produced.element_type() && caller.is_contiguous();
      const kernels::TensorLayout layout = ctx.graph_output_layouts[i];
      Tensor& target = direct ? caller : st.output_scratch[i];
      if (!direct) ensure_buffer(target, produced.element_type(), produced.shape());
      if (layout.is_plain())
        produced.copy_to(target);
      else  // back from the stream's blocked layout
        kernels::convert_layout(produced, layout, target, {});
      st.model_outputs[i] = direct ? Tensor() : target;  // direct: nothing for postprocess
    }
  });
}

}  // namespace

caf::behavior download_stage(caf::event_based_actor* self, Context ctx, Handles next) {
  return {
      [self, ctx, next](stage_atom, batch_msg& batch) {
        std::vector<int32_t> slots;
        for (request_msg& msg : batch.requests) {
          download(*ctx, msg);
          if (msg.slot >= 0) slots.push_back(msg.slot);
        }
        // The requests first: their message is then ahead of the slot release in the scheduler's
        // queue. Measured on the ONNX MLP, one request in flight, 6 alternating runs each: the
        // wait before postprocess was 0.4-0.6x the wait before download, 1.0-1.2x with the
        // release sent first.
        send_batch(self, next->postprocess, stage_atom::value, std::move(batch));
        if (!slots.empty()) self->send(next->upload, release_atom::value, std::move(slots));
      },
  };
}

}  // namespace troupe::actors
