// Completion: the last actor a request visits. It records the request's trace, marks it done,
// wakes waiters and runs the caller's callback. It is spawned detached, so a slow or blocking user
// callback delays only other callbacks, never a stage; an exception from a callback is swallowed.

#include "actors/stage.hpp"

namespace troupe::actors {

namespace {
thread_local bool callback_thread = false;
}

bool on_callback_thread() {
  return callback_thread;
}

caf::behavior completion_actor(caf::event_based_actor* self, Context ctx, Handles next) {
  return {
      [ctx](complete_atom, request_msg msg) {
        callback_thread = true;
        detail::RequestState& st = *msg.state;
        msg.trace.run_id = msg.id;
        msg.trace.completed_ns = detail::now_ns();
        ctx->stats.record(msg.trace, msg.error != nullptr);
        std::function<void(std::exception_ptr)> callback;
        std::function<void(detail::RequestState&, std::exception_ptr)> internal;
        {
          std::lock_guard<std::mutex> lock(st.mutex);
          st.last_trace = std::move(msg.trace);
          st.error = msg.error;
          st.busy = false;
          ++st.completed_runs;
          callback = st.callback;
          internal = st.on_complete;
          st.callback_running = static_cast<bool>(callback) || static_cast<bool>(internal);
        }
        if (!callback && !internal) {
          st.done_cv.notify_all();
          return;
        }
        if (internal) {
          try {
            internal(st, msg.error);
          } catch (...) {
          }
        }
        if (callback) {
          try {
            callback(msg.error);
          } catch (...) {
            // A throwing callback must not affect the pipeline or other requests.
          }
        }
        {
          std::lock_guard<std::mutex> lock(st.mutex);
          st.callback_running = false;
        }
        st.done_cv.notify_all();
      },
      [self, next](drain_atom) {
        // Every completion queued before this message has been delivered.
        self->send(next->front, drain_atom::value);
        self->quit();
      },
  };
}

}  // namespace troupe::actors
