#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "python_state.hpp"
#include "troupe/compiled_model.hpp"

namespace troupe::python {

namespace py = pybind11;

/// troupe.InferRequest: a request with the model's inputs and outputs at hand, the arrays it
/// feeds kept alive by the tensors that wrap them, and the user data its callback receives.
class InferRequestHandle {
 public:
  explicit InferRequestHandle(CompiledModel& model);
  /// Destroys the request with the GIL released: dropping the last handle of a pipeline waits for
  /// its requests in flight, whose callbacks need the GIL.
  ~InferRequestHandle();
  InferRequestHandle(const InferRequestHandle&) = delete;
  InferRequestHandle& operator=(const InferRequestHandle&) = delete;

  /// What an input's tensor wraps when it wraps a caller's array in place; the tensor holds a
  /// reference to the array, so the pointers stay valid while it lives.
  struct BoundArray {
    PyObject* array = nullptr;
    const void* data = nullptr;
    PyObject* dtype = nullptr;
    std::vector<py::ssize_t> shape;
    /// Whether `value` is still this array: same object, memory, dtype and shape.
    bool same_as(py::handle value) const;
  };
  static BoundArray describe_array(py::handle value);
  /// The last tensor made per input by input_tensors, reused while the caller passes the same
  /// array again.
  using InputCache = std::vector<std::pair<BoundArray, Tensor>>;

  /// Binds inputs given as a dict (name, index or ValueInfo -> value), a list (by position) or
  /// one value (the first input).
  void set_inputs(py::handle inputs, bool share);
  /// The tensors set_inputs would bind, by input index, checked against the model's inputs
  /// (TensorMismatch naming the input) without binding them.
  std::vector<std::pair<size_t, Tensor>> input_tensors(py::handle inputs, bool share,
                                                       InputCache* cache = nullptr) const;
  /// Output name -> array (views of the output tensors when `share`, else copies).
  py::dict results(bool share) const;

  py::dict infer(py::handle inputs, bool share_inputs, bool share_outputs);
  /// `userdata` None keeps the previous one (set_callback's) unless `reset_userdata`.
  void start_async(py::handle inputs, py::handle userdata, bool share_inputs,
                   bool reset_userdata = false);
  void wait();
  bool wait_for(int64_t timeout_ms);
  void set_callback(py::handle callback, py::handle userdata);
  /// Installs a C++ completion callback (AsyncInferQueue's) instead of a Python one.
  void set_native_callback(std::function<void(std::exception_ptr)> callback);
  void cancel();
  /// request().start_async(), counted for the interpreter's exit (run_started / run_finished).
  /// Every start of a request made here goes through it: its callback ends the count.
  void start_counted();

  /// Binds one input. Binding the array already bound (same object, memory, shape and dtype) is
  /// skipped: the request's tensor wraps that memory already.
  void bind_input(size_t index, py::handle value, bool share);
  void bind_output(size_t index, py::handle value);
  /// The inputs were bound by other means (AsyncInferQueue, on troupe's thread): bind_input must
  /// not skip a rebinding on what it remembers.
  void forget_bound_inputs() { bound_stale_.store(true); }

  size_t input_index(py::handle key) const;
  size_t output_index(py::handle key) const;

  InferRequest& request() { return request_; }
  const InferRequest& request() const { return request_; }
  const std::vector<ValueInfo>& inputs() const { return inputs_; }
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  /// Set before a start, read by the callback; both with the GIL held.
  const std::shared_ptr<SharedObject>& userdata() const { return userdata_; }

 private:
  /// Calls `bind(index, value)` for each input in `inputs` (see set_inputs).
  void for_each_input(py::handle inputs, const std::function<void(size_t, py::handle)>& bind) const;
  void install_callback(SharedObject callback);

  InferRequest request_;
  std::vector<BoundArray> bound_;  // per input
  std::atomic<bool> bound_stale_{false};
  std::vector<ValueInfo> inputs_;
  std::vector<ValueInfo> outputs_;
  std::shared_ptr<SharedObject> userdata_ = std::make_shared<SharedObject>();
};

/// Runs a Python callable from a troupe thread: takes the GIL (unless the interpreter is exiting),
/// calls `invoke` and reports an exception it raises through sys.unraisablehook.
void call_python_callback(const SharedObject& callable, const char* where,
                          const std::function<void(py::object&)>& invoke);

}  // namespace troupe::python
