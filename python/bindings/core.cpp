#include <pybind11/stl.h>

#include <sstream>

#include "bindings.hpp"
#include "compiled_model.hpp"
#include "troupe/core.hpp"

namespace troupe::python {

namespace {

/// troupe.Core; destroyed with the GIL released, since its actor system waits for its actors.
struct CoreHandle {
  std::unique_ptr<Core> core = std::make_unique<Core>();
  ~CoreHandle() {
    py::gil_scoped_release release;
    core.reset();
  }
};

std::string path_of(py::handle path) {
  return py::str(py::module_::import("os").attr("fspath")(path));
}

std::shared_ptr<CompiledModelHandle> wrap(CompiledModel model) {
  return std::make_shared<CompiledModelHandle>(std::move(model));
}

// The blob's bytes from bytes, bytearray, memoryview or a readable binary file.
std::string blob_of(py::handle source) {
  if (py::hasattr(source, "read")) return source.attr("read")().cast<std::string>();
  if (py::isinstance<py::bytes>(source)) return source.cast<std::string>();
  return py::bytes(py::module_::import("builtins").attr("bytes")(source)).cast<std::string>();
}

}  // namespace

void bind_core(py::module_& m) {
  py::class_<CoreHandle>(m, "Core",
                         "Entry point: reads models, compiles them for a device and "
                         "holds device properties.")
      .def(py::init<>())
      .def(
          "read_model",
          [](CoreHandle& c, py::handle path) {
            const std::string p = path_of(path);
            py::gil_scoped_release release;
            return c.core->read_model(p);
          },
          py::arg("model"), "Reads an ONNX or .troupe model file.")
      .def(
          "compile_model",
          [](CoreHandle& c, py::handle model, const std::string& device, py::handle config) {
            const AnyMap properties = any_map_from_python(config);
            if (py::isinstance<Model>(model)) {
              std::shared_ptr<Model> graph = model.cast<std::shared_ptr<Model>>();
              py::gil_scoped_release release;
              return wrap(c.core->compile_model(graph, device, properties));
            }
            const std::string p = path_of(model);
            py::gil_scoped_release release;
            return wrap(c.core->compile_model(p, device, properties));
          },
          py::arg("model"), py::arg("device_name") = "CPU", py::arg("config") = py::none(),
          "Compiles a Model or a model file (GIL released). `config` is a dict of properties "
          "overriding the device's; with CACHE_DIR a file's compiled model is cached.")
      .def(
          "import_model",
          [](CoreHandle& c, py::handle source, const std::string& device, py::handle config) {
            const AnyMap properties = any_map_from_python(config);
            std::istringstream in(blob_of(source));
            py::gil_scoped_release release;
            return wrap(c.core->import_model(in, device, properties));
          },
          py::arg("model_stream"), py::arg("device_name") = "CPU", py::arg("config") = py::none(),
          "Loads a blob from CompiledModel.export_model (bytes or a binary file).")
      .def(
          "query_model",
          [](CoreHandle& c, const std::shared_ptr<Model>& model, const std::string& device,
             py::handle config) {
            const AnyMap properties = any_map_from_python(config);
            py::gil_scoped_release release;
            return c.core->query_model(model, device, properties);
          },
          py::arg("model"), py::arg("device_name") = "CPU", py::arg("config") = py::none(),
          "Node name -> device for the nodes the device can run.")
      .def_property_readonly("available_devices",
                             [](CoreHandle& c) { return c.core->available_devices(); })
      .def("get_available_devices", [](CoreHandle& c) { return c.core->available_devices(); })
      .def_property_readonly("supported_model_formats",
                             [](CoreHandle& c) { return c.core->supported_model_formats(); })
      .def(
          "get_property",
          [](CoreHandle& c, const std::string& device, const std::string& name) {
            return any_to_python(c.core->get_property(device, name));
          },
          py::arg("device_name"), py::arg("name"))
      .def(
          "set_property",
          [](CoreHandle& c, const std::string& device, py::handle properties) {
            c.core->set_property(device, any_map_from_python(properties));
          },
          py::arg("device_name"), py::arg("properties"), "Sets device properties (a dict).")
      .def(
          "set_property",
          [](CoreHandle& c, py::handle properties) {
            c.core->set_property("CPU", any_map_from_python(properties));
          },
          py::arg("properties"), "Sets properties of the CPU device.");
}

}  // namespace troupe::python
