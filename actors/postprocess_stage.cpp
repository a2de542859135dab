// Postprocess: converts outputs into the caller's element type and layout (declared with
// PrePostProcessor, or implied by the tensor the caller bound), then hands the request to the
// completion actor, which returns the batch's credit to the scheduler — or, when no request of the
// batch runs user code on completion, completes them here and returns the credit (finish_batch).

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
        finish_batch(self, *ctx, *next, std::move(batch));
        // Only after the batch is completed or queued for completion: shutdown waits on this count.
        for (size_t i = 0; i < n; ++i) ctx->in_flight.release();
      },
  };
}

}  // namespace troupe::actors
