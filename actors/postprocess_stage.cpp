// Postprocess: converts outputs into the caller's element type and layout (declared with
// PrePostProcessor, or implied by the tensor the caller bound), then hands the request to the
// completion actor, which returns the batch's credit to the scheduler — or, when no request of the
// batch runs user code on completion, completes them here and returns the credit itself.

#include "actors/stage.hpp"
#include "kernels/preprocess/image_ops.hpp"

namespace troupe::actors {

caf::behavior postprocess_stage(caf::event_based_actor* self, Context ctx, Handles next) {
  return {
      [self, ctx, next](stage_atom, batch_msg& batch) {
        for (request_msg& msg : batch.requests) {
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
        }
        const size_t n = batch.requests.size();
        if (completes_in_stage(*ctx, batch)) {
          for (request_msg& msg : batch.requests) complete(*ctx, msg, self->context());
          const Credit credit = credit_of(batch);
          if (credit.batch_size > 0) self->send(next->scheduler, credit_atom::value, credit);
        } else {
          send_batch(self, next->completion, complete_atom::value, std::move(batch));
        }
        // Only after the completion message is queued: shutdown waits on this count.
        for (size_t i = 0; i < n; ++i) ctx->in_flight.release();
      },
  };
}

}  // namespace troupe::actors
