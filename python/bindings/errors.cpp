#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "troupe/error.hpp"

namespace troupe::python {

namespace {

// The exception classes, created once at import and kept for the process (the translator may run
// late in interpreter shutdown, after the module's dict is gone).
struct ErrorClasses {
  PyObject* error;
  PyObject* invalid_argument;
  PyObject* unknown_property;
  PyObject* tensor_mismatch;
  PyObject* model_error;
  PyObject* unsupported_operation;
  PyObject* busy;
  PyObject* cancelled;
  PyObject* queue_full;
  PyObject* request_timeout;
  PyObject* execution_error;
  PyObject* format_error;
};
ErrorClasses classes;

PyObject* make_class(py::module_& m, const char* name, std::initializer_list<PyObject*> bases,
                     const char* doc) {
  py::tuple base_tuple(bases.size());
  size_t i = 0;
  for (PyObject* b : bases) base_tuple[i++] = py::reinterpret_borrow<py::object>(b);
  const std::string qualified = std::string("troupe.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base_tuple.ptr(), nullptr);
  if (!cls) throw py::error_already_set();
  m.add_object(name, py::reinterpret_borrow<py::object>(cls));
  return cls;
}

}  // namespace

void bind_errors(py::module_& m) {
  auto& c = classes;
  c.error = make_class(m, "Error", {PyExc_RuntimeError},
                       "Base of every error troupe raises; the message names the offending input.");
  c.invalid_argument = make_class(m, "InvalidArgument", {c.error, PyExc_ValueError},
                                  "A caller-supplied value is wrong (a property value, a tensor "
                                  "name, a file).");
  c.unknown_property = make_class(m, "UnknownProperty", {c.invalid_argument},
                                  "A property key the device or compiled model does not know.");
  c.tensor_mismatch = make_class(m, "TensorMismatch", {c.invalid_argument, PyExc_TypeError},
                                 "A tensor whose shape or element type does not fit the model's "
                                 "input or output.");
  c.model_error = make_class(m, "ModelError", {c.error},
                             "A model that fails validation or shape inference (names the node).");
  c.unsupported_operation =
      make_class(m, "UnsupportedOperation", {c.model_error, PyExc_NotImplementedError},
                 "The model has an operation no backend of the device implements.");
  c.busy =
      make_class(m, "Busy", {c.error},
                 "The request is in flight; its tensors cannot be touched until it completes.");
  c.cancelled = make_class(m, "Cancelled", {c.error}, "The request was cancelled.");
  c.queue_full =
      make_class(m, "QueueFull", {c.error},
                 "The scheduler's queue for the request's priority is full; retry later.");
  c.request_timeout = make_class(m, "RequestTimeout", {c.error, PyExc_TimeoutError},
                                 "The request's queue timeout passed before it was scheduled.");
  c.execution_error = make_class(m, "ExecutionError", {c.error},
                                 "A kernel or stage failed while running a request.");
  c.format_error = make_class(m, "FormatError", {c.error, PyExc_ValueError},
                              "A model file or compiled blob is malformed or does not belong to "
                              "this build or device.");

  // Most derived first: each catch takes its class and all below it.
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const UnknownProperty& e) {
      PyErr_SetString(classes.unknown_property, e.what());
    } catch (const TensorMismatch& e) {
      PyErr_SetString(classes.tensor_mismatch, e.what());
    } catch (const InvalidArgument& e) {
      PyErr_SetString(classes.invalid_argument, e.what());
    } catch (const UnsupportedOperation& e) {
      PyErr_SetString(classes.unsupported_operation, e.what());
    } catch (const ModelError& e) {
      PyErr_SetString(classes.model_error, e.what());
    } catch (const Busy& e) {
      PyErr_SetString(classes.busy, e.what());
    } catch (const Cancelled& e) {
      PyErr_SetString(classes.cancelled, e.what());
    } catch (const QueueFull& e) {
      PyErr_SetString(classes.queue_full, e.what());
    } catch (const RequestTimeout& e) {
      PyErr_SetString(classes.request_timeout, e.what());
    } catch (const ExecutionError& e) {
      PyErr_SetString(classes.execution_error, e.what());
    } catch (const FormatError& e) {
      PyErr_SetString(classes.format_error, e.what());
    } catch (const Error& e) {
      PyErr_SetString(classes.error, e.what());
    }
  });
}

}  // namespace troupe::python
