#include "compiled_model.hpp"

#include <pybind11/stl.h>

#include <sstream>

#include "bindings.hpp"
#include "troupe/error.hpp"

namespace troupe::python {

CompiledModelHandle::~CompiledModelHandle() {
  call_request_.reset();  // releases the GIL itself
  py::gil_scoped_release release;
  model_ = CompiledModel();
}

InferRequestHandle& CompiledModelHandle::call_request() {
  if (!call_request_) call_request_ = std::make_shared<InferRequestHandle>(model_);
  return *call_request_;
}

void bind_compiled_model(py::module_& m) {
  using Handle = CompiledModelHandle;
  py::class_<Handle, std::shared_ptr<Handle>>(m, "CompiledModel", R"doc(
A model compiled for a device: a pipeline of stage actors. Call it with inputs for one
synchronous inference, or make InferRequests (or an AsyncInferQueue) to run many at once.
)doc")
      .def_property_readonly(
          "inputs", [](Handle& h) { return h.model().inputs(); }, "The model inputs (ValueInfo).")
      .def_property_readonly(
          "outputs", [](Handle& h) { return h.model().outputs(); },
          "The model outputs (ValueInfo).")
      .def(
          "input",
          [](Handle& h, py::handle key) {
            const auto& ins = h.model().inputs();
            const py::object k =
                key.is_none() ? py::int_(0) : py::reinterpret_borrow<py::object>(key);
            return ins[index_of(k, ins, "input")];
          },
          py::arg("key") = py::none(), "An input by index (default 0) or name.")
      .def(
          "output",
          [](Handle& h, py::handle key) {
            const auto& outs = h.model().outputs();
            const py::object k =
                key.is_none() ? py::int_(0) : py::reinterpret_borrow<py::object>(key);
            return outs[index_of(k, outs, "output")];
          },
          py::arg("key") = py::none(), "An output by index (default 0) or name.")
      .def(
          "create_infer_request",
          [](Handle& h) { return std::make_shared<InferRequestHandle>(h.model()); },
          "A new InferRequest; any number may run at once.")
      .def(
          "__call__",
          [](Handle& h, py::handle inputs, bool share_inputs, bool share_outputs) {
            return h.call_request().infer(inputs, share_inputs, share_outputs);
          },
          py::arg("inputs") = py::none(), py::arg("share_inputs") = true,
          py::arg("share_outputs") = false,
          "One synchronous inference on an internal request; returns output name -> array.")
      .def(
          "get_property",
          [](Handle& h, const std::string& name) {
            return any_to_python(h.model().get_property(name));
          },
          py::arg("name"),
          "A read-only property (NETWORK_NAME, OPTIMAL_NUMBER_OF_INFER_REQUESTS, ...) or the "
          "effective configuration.")
      .def(
          "set_property",
          [](Handle& h, py::handle properties) {
            h.model().set_property(any_map_from_python(properties));
          },
          py::arg("properties"), "Changes scheduling properties while requests run.")
      .def(
          "get_runtime_model",
          [](Handle& h) { return std::const_pointer_cast<Model>(h.model().runtime_model()); },
          "The executed graph: one node per kernel (layer_type, execution_order, "
          "implementation, ...).")
      .def_property_readonly(
          "runtime_model",
          [](Handle& h) { return std::const_pointer_cast<Model>(h.model().runtime_model()); })
      .def(
          "export_model",
          [](Handle& h) {
            std::ostringstream out;
            {
              py::gil_scoped_release release;
              h.model().export_model(out);
            }
            return py::bytes(out.str());
          },
          "The compiled model as a blob for Core.import_model.")
      .def(
          "stats_report", [](Handle& h) { return h.model().stats_report(); },
          "Aggregate statistics of every request run so far.");
}

}  // namespace troupe::python
