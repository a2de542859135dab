// Download: copies the outputs out of the execute slot and returns the slot to upload. Where the
// caller's output tensor already has the model's type and is dense, it is written directly;
// otherwise into a scratch buffer that postprocess converts.

#include "actors/stage.hpp"
#include "actors/tensor_checks.hpp"

namespace troupe::actors {

caf::behavior download_stage(caf::event_based_actor* self, Context ctx, Handles next) {
  return {
      [self, ctx, next](stage_atom, request_msg msg) {
        run_stage(*ctx, detail::Stage::download, msg, [&] {
          detail::RequestState& st = *msg.state;
          ExecuteSlot& slot = ctx->slots[static_cast<size_t>(msg.slot)];
          const size_t n = ctx->outputs.size();
          st.model_outputs.resize(n);
          st.output_scratch.resize(n);
          for (size_t i = 0; i < n; ++i) {
            const Tensor& produced = slot.outputs[i];
            Tensor& caller = st.outputs[i];
            const bool caller_set = i < st.caller_output.size() && st.caller_output[i];
            if (!caller_set) {
              // troupe owns this output: (re)allocate it in the model's type and actual shape.
              ensure_buffer(caller, produced.element_type(), produced.shape());
            } else if (caller.shape() != produced.shape()) {
              throw TensorMismatch("output '" + ctx->outputs[i].name + "': tensor of shape " +
                                   caller.shape().to_string() + " cannot hold the result of shape " +
                                   produced.shape().to_string());
            }
            if (caller.element_type() == produced.element_type() && caller.is_contiguous()) {
              produced.copy_to(caller);
              st.model_outputs[i] = Tensor();  // nothing left for postprocess
            } else {
              ensure_buffer(st.output_scratch[i], produced.element_type(), produced.shape());
              produced.copy_to(st.output_scratch[i]);
              st.model_outputs[i] = st.output_scratch[i];
            }
          }
        });
        if (msg.slot >= 0) self->send(next->upload, release_atom::value, msg.slot);
        self->send(next->postprocess, stage_atom::value, std::move(msg));
      },
  };
}

}  // namespace troupe::actors
