// Preprocess: checks each input against what the caller was told to bind, runs the declared
// preprocessing steps (PrePostProcessor: type and layout conversion, resize, mean/scale, channel
// order) and otherwise converts where the caller's tensor differs from what the graph takes
// (element type, strided region -> dense). A tensor that already fits is passed on without a copy.

#include "actors/stage.hpp"
#include "actors/tensor_checks.hpp"
#include "kernels/preprocess/image_ops.hpp"

namespace troupe::actors {

namespace {
const InputPreprocessing* input_plan_for(const PipelineContext& ctx, size_t i) {
  if (!ctx.pre_post || i >= ctx.pre_post->inputs.size() || !ctx.pre_post->inputs[i]) return nullptr;
  return &*ctx.pre_post->inputs[i];
}
}  // namespace

caf::behavior preprocess_stage(caf::event_based_actor* self, Context ctx, Handles next) {
  return {
      [self, ctx, next](stage_atom, batch_msg& batch) {
        for (request_msg& msg : batch.requests)
          run_stage(*ctx, detail::Stage::preprocess, msg, [&] {
            detail::RequestState& st = *msg.state;
            const size_t n = ctx->inputs.size();
            st.model_inputs.resize(n);
            st.input_scratch.resize(n);
            for (size_t i = 0; i < n; ++i) {
              const ValueInfo& info = ctx->inputs[i];
              const Tensor& given = st.inputs[i];
              check_tensor_fits("input", info, given);
              if (const InputPreprocessing* plan = input_plan_for(*ctx, i)) {
                st.model_inputs[i] =
                    kernels::preprocess::run_preprocessing(*plan, given, ctx->graph_inputs[i]);
              } else if (given.element_type() == info.type && given.is_contiguous()) {
                st.model_inputs[i] = given;
              } else {
                ensure_buffer(st.input_scratch[i], info.type, given.shape());
                given.copy_to(st.input_scratch[i]);
                st.model_inputs[i] = st.input_scratch[i];
              }
            }
          });
        send_batch(self, next->upload, stage_atom::value, std::move(batch));
      },
  };
}

}  // namespace troupe::actors
