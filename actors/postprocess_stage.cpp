// Postprocess: converts outputs into the caller's element type and layout (declared with
// PrePostProcessor, or implied by the tensor the caller bound), then hands the request to the
// completion actor and returns its credit to admission.

#include "actors/stage.hpp"
#include "kernels/preprocess/image_ops.hpp"

namespace troupe::actors {

caf::behavior postprocess_stage(caf::event_based_actor* self, Context ctx, Handles next) {
  return {
      [self, ctx, next](stage_atom, request_msg msg) {
        run_stage(*ctx, detail::Stage::postprocess, msg, [&] {
          detail::RequestState& st = *msg.state;
          for (size_t i = 0; i < st.model_outputs.size(); ++i) {
            if (st.model_outputs[i].empty()) continue;
            const auto& ppp = ctx->pre_post;
            if (ppp && i < ppp->outputs.size() && ppp->outputs[i])
              kernels::preprocess::run_postprocessing(*ppp->outputs[i], st.model_outputs[i],
                                                      st.outputs[i]);
            else
              st.model_outputs[i].copy_to(st.outputs[i]);
          }
        });
        self->send(next->completion, complete_atom::value, std::move(msg));
        // Only after the completion message is queued: shutdown waits on this count.
        ctx->in_flight.release();
        self->send(next->admission, credit_atom::value);
      },
  };
}

}  // namespace troupe::actors
