#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <vector>

#include "engine/graph/stream_executor.hpp"
#include "troupe/profiling_info.hpp"
#include "troupe/tensor.hpp"

namespace caf {
class execution_unit;
}

namespace troupe::detail {

inline constexpr size_t stage_count = 5;
enum class Stage : size_t { preprocess = 0, upload, execute, download, postprocess };

/// Start/end of one stage for one request (steady clock ns) and the CPU time it used.
struct StageSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t cpu_ns = 0;
  int32_t worker = 0;  // execute stream index for the execute stage
  int32_t batch = 1;   // requests that shared this span (automatic batching in execute)
};

/// Everything the pipeline records about one pass of a request.
struct RequestTrace {
  uint64_t run_id = 0;
  int64_t submitted_ns = 0;
  int64_t completed_ns = 0;
  std::array<StageSpan, stage_count> stages{};
  std::vector<OpTiming> ops;  // per executed node, when profiling

  /// When the request was ready for `stage`: submitted (the first stage) or the previous stage's
  /// end; its start minus this is the wait before it. 0 when not reached.
  int64_t ready_ns(size_t stage) const {
    return stage == 0 ? submitted_ns : stages[stage - 1].end_ns;
  }
};

/// The state of one infer request, shared by its InferRequest handle and the pipeline message.
/// Ownership rule: while `busy`, only the stage currently holding the request message touches the
/// tensors below (one stage at a time, handed over by message), and the handle refuses access.
struct RequestState {
  // Bound by the caller while idle; read by preprocess, written by postprocess.
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  std::vector<bool> caller_output;  // output i was set by the caller (else troupe allocates)

  // Views handed between stages: the caller's tensor itself when it already has the model's type
  // and is dense, otherwise a scratch buffer.
  std::vector<Tensor> model_inputs;   // inputs in the model's type, dense
  std::vector<Tensor> model_outputs;  // outputs in the model's type, dense
  // Pipeline-owned conversion buffers, reused across runs (never alias caller memory).
  std::vector<Tensor> input_scratch;
  std::vector<Tensor> output_scratch;

  RequestTrace last_trace;  // the last completed run (what profiling_info reports)

  std::function<void(std::exception_ptr)> callback;
  /// Internal continuation (the typed actor front end), runs before the user callback, given the
  /// execution unit completing the request (a stage's worker, or null). It must not block: without
  /// a user callback, a stage's worker completes the request and runs it.
  std::function<void(RequestState&, std::exception_ptr, caf::execution_unit*)> on_complete;

  std::atomic<bool> cancel_requested{false};
  // Scheduling requests, set while idle and read by the scheduler (0 = the model's defaults).
  int64_t priority = 0;
  int64_t timeout_us = 0;

  std::mutex mutex;
  std::condition_variable done_cv;
  bool busy = false;              // guarded by mutex
  bool callback_running = false;  // guarded by mutex
  // Guarded by mutex: this run is a synchronous infer(), which does not call `callback` (as
  // OpenVINO's does not); its caller waits for it instead.
  bool callback_disabled = false;
  std::exception_ptr error;     // guarded by mutex; error of the last completed run
  uint64_t completed_runs = 0;  // guarded by mutex
};

}  // namespace troupe::detail
