// Preprocess: checks each input against the model and converts where the caller's tensor differs
// from what the model takes (element type, strided region -> dense). A tensor that already fits is
// passed on without a copy.

#include "actors/stage.hpp"
#include "actors/tensor_checks.hpp"

namespace troupe::actors {

caf::behavior preprocess_stage(caf::event_based_actor* self, Context ctx, Handles next) {
  return {
      [self, ctx, next](stage_atom, request_msg msg) {
        run_stage(*ctx, detail::Stage::preprocess, msg, [&] {
          detail::RequestState& st = *msg.state;
          const size_t n = ctx->inputs.size();
          st.model_inputs.resize(n);
          st.input_scratch.resize(n);
          for (size_t i = 0; i < n; ++i) {
            const ValueInfo& info = ctx->inputs[i];
            const Tensor& given = st.inputs[i];
            check_tensor_fits("input", info, given);
            if (given.element_type() == info.type && given.is_contiguous()) {
              st.model_inputs[i] = given;
            } else {
              ensure_buffer(st.input_scratch[i], info.type, given.shape());
              given.copy_to(st.input_scratch[i]);
              st.model_inputs[i] = st.input_scratch[i];
            }
          }
        });
        self->send(next->upload, stage_atom::value, std::move(msg));
      },
  };
}

}  // namespace troupe::actors
