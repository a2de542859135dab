#pragma once

#include <pybind11/pybind11.h>

#include <memory>

namespace troupe::python {

namespace py = pybind11;

/// Drops one reference to `object`. With the GIL held it is dropped at once; on a thread without
/// it (a troupe actor releasing the last copy of a tensor that wraps a NumPy array) it is queued
/// and dropped by the next binding call that holds the GIL, so troupe's threads never wait for
/// the GIL just to release memory.
void release_reference(PyObject* object);

/// Drops the references queued by release_reference. Called on entry to the bindings that start
/// or bind work (cheap when nothing is queued).
void drain_released_references();

/// Shares ownership of a Python object with C++ code that may drop it on any thread.
std::shared_ptr<void> share_object(py::object object);

/// A Python object held by C++ state that troupe's threads copy and destroy (callbacks, user
/// data): copies share one reference, the last one is dropped with release_reference.
class SharedObject {
 public:
  SharedObject() = default;
  explicit SharedObject(py::object object) : ref_(share_object(std::move(object))) {}
  explicit operator bool() const { return static_cast<bool>(ref_); }
  /// A new reference; needs the GIL.
  py::object get() const {
    return ref_ ? py::reinterpret_borrow<py::object>(static_cast<PyObject*>(ref_.get()))
                : py::none();
  }

 private:
  std::shared_ptr<void> ref_;
};

/// Entered by a troupe thread before it takes the GIL to run Python code (a callback). Returns
/// false once the interpreter is shutting down: the callback is then skipped, since a thread that
/// takes the GIL during finalization is stopped for good. Pair each true with leave_python().
bool enter_python();
void leave_python();

/// Counts the runs started from Python until their completion callback has returned. A run still
/// in flight when the process exits would execute kernels whose code and tables the C++ static
/// destructors are freeing, so on_interpreter_exit waits for the count to reach zero.
void run_started();
void run_finished();

/// Registered with atexit: stops new Python callbacks, then waits (GIL released) for running
/// callbacks and for runs in flight.
void on_interpreter_exit();

/// Reports the Python exception in flight as unraisable (sys.unraisablehook) with `where`.
void report_callback_error(py::error_already_set& error, const char* where);

}  // namespace troupe::python
