#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "troupe/profiling_info.hpp"
#include "troupe/tensor.hpp"

namespace troupe {

namespace detail {
class CompiledModelImpl;
struct RequestState;
}  // namespace detail

/// One inference: its input and output tensors, run synchronously (infer) or asynchronously
/// (start_async + wait / callback). Many requests of one CompiledModel run at once, each at its own
/// pipeline stage. While a request is in flight its tensors and counters are off limits (Busy).
class InferRequest {
 public:
  InferRequest() = default;

  /// Binds a caller tensor to an input or output, by name or index. An input tensor is read when
  /// the request starts; an output tensor receives the result. Shape must fit the model's; the
  /// element type may differ where is_convertible allows (the stages convert). Throws
  /// TensorMismatch / InvalidArgument naming the tensor, Busy while in flight.
  void set_tensor(const std::string& name, const Tensor& tensor);
  void set_input_tensor(size_t index, const Tensor& tensor);
  void set_output_tensor(size_t index, const Tensor& tensor);
  /// The tensor bound to an input or output (allocated by troupe unless the caller set one).
  Tensor get_tensor(const std::string& name) const;
  Tensor get_input_tensor(size_t index = 0) const;
  Tensor get_output_tensor(size_t index = 0) const;

  /// Runs to completion; rethrows the request's error. The callback is not called for it (as
  /// OpenVINO's synchronous infer does not call it).
  void infer();
  /// Sends the request into the pipeline and returns at once.
  void start_async();
  /// Blocks until the request completes; rethrows its error (Cancelled after cancel()).
  void wait();
  /// Waits at most `timeout`; true when complete (then rethrows its error like wait()).
  bool wait_for(std::chrono::milliseconds timeout);
  /// Called once when a run started by start_async() completes, with nullptr or the error. Runs on
  /// troupe's callback actor, never on a stage: it may block briefly, and an exception it throws is
  /// swallowed.
  void set_callback(std::function<void(std::exception_ptr)> callback);
  /// Cancels the request if it has not completed; wait() then throws Cancelled.
  void cancel();

  /// The scheduling priority of this request's next runs: 1 is the highest, up to the compiled
  /// model's `priority_levels`; 0 (the default) takes `default_priority_level`. Checked when the
  /// request starts: an out-of-range level fails it with InvalidArgument.
  void set_priority(int64_t priority);
  /// The queue timeout of this request's next runs: when `allow_timeout_override` is set, the
  /// shorter of this and `default_timeout_microseconds` (0: the default). A request not scheduled
  /// by then fails with RequestTimeout (timeout_action REJECT) or waits behind the others (DELAY).
  void set_timeout(std::chrono::microseconds timeout);

  /// The five stage entries of the last completed run, then one entry per executed node when
  /// profiling (PERF_COUNT) is enabled.
  std::vector<ProfilingInfo> profiling_info() const;

  explicit operator bool() const { return static_cast<bool>(state_); }

 private:
  friend class CompiledModel;
  InferRequest(std::shared_ptr<detail::CompiledModelImpl> model,
               std::shared_ptr<detail::RequestState> state);
  std::shared_ptr<detail::CompiledModelImpl> model_;
  std::shared_ptr<detail::RequestState> state_;
};

}  // namespace troupe
