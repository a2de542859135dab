// Execute: runs the graph for one request on this stream's executor. Spawned detached (its own
// thread): a graph run is long blocking compute that must not starve CAF's scheduler, and oneDNN's
// OpenMP team is per calling thread, so one thread per stream keeps the teams apart.

#ifdef _OPENMP
#include <omp.h>
#endif

#include "actors/stage.hpp"

namespace troupe::actors {

caf::behavior execute_stage(caf::event_based_actor* self, Context ctx, Handles next, int stream) {
  auto threads_set = std::make_shared<bool>(false);
  return {
      [self, ctx, next, stream, threads_set](stage_atom, request_msg msg) {
        if (!*threads_set) {
#ifdef _OPENMP
          omp_set_num_threads(ctx->config.threads_per_stream);
#endif
          *threads_set = true;
        }
        ExecuteSlot& slot = ctx->slots[static_cast<size_t>(msg.slot)];
        run_stage(
            *ctx, detail::Stage::execute, msg,
            [&] {
              auto* timings = ctx->config.enable_profiling ? &msg.trace.ops : nullptr;
              ctx->executors[static_cast<size_t>(stream)]->run(slot.inputs, slot.outputs, timings);
            },
            stream);
        self->send(next->download, stage_atom::value, std::move(msg));
      },
  };
}

}  // namespace troupe::actors
