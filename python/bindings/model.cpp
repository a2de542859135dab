#include <pybind11/stl.h>

#include "bindings.hpp"
#include "numpy_tensor.hpp"
#include "troupe/model_builder.hpp"
#include "troupe/serialize.hpp"

namespace troupe::python {

namespace {

py::object attribute_to_python(const AttributeValue& value) {
  return std::visit(
      [](const auto& v) -> py::object {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Tensor>)
          return array_from_tensor(v, false);
        else if constexpr (std::is_same_v<T, Subgraph>)
          return py::cast(std::const_pointer_cast<Model>(v));  // read-only by convention
        else
          return py::cast(v);
      },
      value);
}

py::dict attributes_to_python(const Attributes& attributes) {
  py::dict out;
  for (const auto& [name, value] : attributes.all())
    out[py::str(name)] = attribute_to_python(value);
  return out;
}

// int, float, str, a list of one of those, or an array (a tensor attribute, copied).
AttributeValue attribute_from_python(const std::string& name, py::handle value) {
  if (py::isinstance<py::bool_>(value) || py::isinstance<py::int_>(value))
    return value.cast<int64_t>();
  if (py::isinstance<py::float_>(value)) return value.cast<double>();
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (py::isinstance<py::array>(value) || py::isinstance<Tensor>(value))
    return tensor_from_python(value, ValueInfo{name, ElementType::undefined, Shape()}, false);
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    auto seq = py::reinterpret_borrow<py::sequence>(value);
    if (seq.size() > 0 && py::isinstance<py::str>(seq[0]))
      return value.cast<std::vector<std::string>>();
    bool all_int = true;
    for (py::handle item : seq) all_int = all_int && py::isinstance<py::int_>(item);
    if (all_int) return value.cast<std::vector<int64_t>>();
    return value.cast<std::vector<double>>();
  }
  throw py::type_error("attribute '" + name + "': a value of type " +
                       std::string(py::str(value.get_type().attr("__name__"))) +
                       " is not an attribute (int, float, str, a list of those, or an array)");
}

Attributes attributes_from_python(py::handle attributes) {
  Attributes out;
  if (attributes.is_none()) return out;
  for (auto [key, value] : py::reinterpret_borrow<py::dict>(attributes)) {
    const std::string name = py::str(key);
    out.set(name, attribute_from_python(name, value));
  }
  return out;
}

std::vector<ValueInfo> infos(const Model& model, const std::vector<ValueId>& ids) {
  std::vector<ValueInfo> out;
  for (ValueId id : ids) out.push_back(model.value(id));
  return out;
}

}  // namespace

void bind_model(py::module_& m) {
  py::enum_<ElementType>(m, "Type",
                         "Element type of a tensor. bf16 has no NumPy dtype: its "
                         "arrays are uint16 views of the bits.")
      .value("undefined", ElementType::undefined)
      .value("f32", ElementType::f32)
      .value("f16", ElementType::f16)
      .value("bf16", ElementType::bf16)
      .value("f64", ElementType::f64)
      .value("i8", ElementType::i8)
      .value("u8", ElementType::u8)
      .value("i32", ElementType::i32)
      .value("i64", ElementType::i64)
      .value("i16", ElementType::i16)
      .value("u16", ElementType::u16)
      .value("u32", ElementType::u32)
      .value("u64", ElementType::u64)
      .value("string", ElementType::string)
      .value("boolean", ElementType::boolean)
      .def("to_dtype", &dtype_of, "The NumPy dtype (uint16 for bf16).")
      .def_property_readonly("size", &element_size, "Bytes per element.")
      .def_static(
          "from_dtype", [](const py::dtype& d) { return element_type_of(d); }, py::arg("dtype"),
          "The element type of a NumPy dtype (Type.undefined when troupe has none).")
      .def("__str__", [](ElementType t) { return std::string(to_string(t)); });

  py::class_<ValueInfo>(m, "ValueInfo",
                        "A named, typed, shaped model input or output (OpenVINO's port).")
      .def_readonly("name", &ValueInfo::name)
      .def_property_readonly("any_name", [](const ValueInfo& v) { return v.name; })
      .def("get_any_name", [](const ValueInfo& v) { return v.name; })
      .def_property_readonly("names",
                             [](const ValueInfo& v) { return py::set(py::make_tuple(v.name)); })
      .def_readonly("element_type", &ValueInfo::type)
      .def("get_element_type", [](const ValueInfo& v) { return v.type; })
      .def_property_readonly("dtype", [](const ValueInfo& v) { return dtype_of(v.type); })
      .def_property_readonly(
          "shape", [](const ValueInfo& v) { return shape_to_python(v.shape); },
          "Dimensions as a tuple; -1 is dynamic.")
      .def("get_shape", [](const ValueInfo& v) { return shape_to_python(v.shape); })
      .def("__repr__", [](const ValueInfo& v) {
        return "<troupe.ValueInfo '" + v.name + "' " + std::string(to_string(v.type)) +
               v.shape.to_string() + ">";
      });

  py::class_<Node>(m, "Node", "One operation of a model graph.")
      .def_readonly("name", &Node::name)
      .def_readonly("op_type", &Node::op_type)
      .def("get_type_name", [](const Node& n) { return n.op_type; })
      .def("get_friendly_name", [](const Node& n) { return n.name; })
      .def_property_readonly(
          "attributes", [](const Node& n) { return attributes_to_python(n.attributes); },
          "The node's attributes as a dict (tensors as NumPy copies).")
      .def("get_rt_info", [](const Node& n) { return attributes_to_python(n.attributes); })
      .def("__repr__",
           [](const Node& n) { return "<troupe.Node " + n.op_type + " '" + n.name + "'>"; });

  py::class_<Model, std::shared_ptr<Model>>(m, "Model", "A validated dataflow graph.")
      .def_property_readonly("name", &Model::name)
      .def("get_name", &Model::name)
      .def_property_readonly("inputs", [](const Model& mod) { return infos(mod, mod.inputs()); })
      .def_property_readonly("outputs", [](const Model& mod) { return infos(mod, mod.outputs()); })
      .def(
          "get_ops", [](const Model& mod) { return mod.nodes(); },
          "The nodes in topological order.")
      .def("__repr__", [](const Model& mod) {
        return "<troupe.Model '" + mod.name() + "' with " + std::to_string(mod.nodes().size()) +
               " nodes>";
      });

  py::class_<ModelBuilder>(m, "ModelBuilder", R"doc(
Builds a model in Python:

    b = troupe.ModelBuilder("mlp")
    x = b.input("x", troupe.Type.f32, [1, 4])
    w = b.constant("w", numpy.eye(4, 2, dtype=numpy.float32))
    b.output(b.op("Relu", [b.op("MatMul", [x, w])]), "y")
    model = b.build()
)doc")
      .def(py::init<std::string>(), py::arg("model_name") = "model")
      .def(
          "input",
          [](ModelBuilder& b, const std::string& name, ElementType type, py::iterable shape) {
            return b.input(name, type, shape_from_python(shape));
          },
          py::arg("name"), py::arg("element_type"), py::arg("shape"),
          "Declares a model input (-1 marks a dynamic dimension); returns its id.")
      .def(
          "constant",
          [](ModelBuilder& b, const std::string& name, py::handle data) {
            // A copy: a model's constants must not change, which a caller's array might.
            return b.constant(
                name,
                tensor_from_python(data, ValueInfo{name, ElementType::undefined, Shape()}, false));
          },
          py::arg("name"), py::arg("data"), "Declares a constant (a copy of the array).")
      .def(
          "op",
          [](ModelBuilder& b, const std::string& op_type, const std::vector<ValueId>& inputs,
             py::handle attributes, const std::string& name) {
            return b.op(op_type, inputs, attributes_from_python(attributes), name);
          },
          py::arg("op_type"), py::arg("inputs"), py::arg("attributes") = py::none(),
          py::arg("name") = "", "Adds a node with one output; returns the output's id.")
      .def(
          "op_multi",
          [](ModelBuilder& b, const std::string& op_type, const std::vector<ValueId>& inputs,
             size_t num_outputs, py::handle attributes, const std::string& name) {
            return b.op_multi(op_type, inputs, num_outputs, attributes_from_python(attributes),
                              name);
          },
          py::arg("op_type"), py::arg("inputs"), py::arg("num_outputs"),
          py::arg("attributes") = py::none(), py::arg("name") = "")
      .def("output", &ModelBuilder::output, py::arg("value"), py::arg("name") = "",
           "Marks a value as a model output, renamed to `name` when given.")
      .def("build", &ModelBuilder::build,
           "Validates the graph (raises ModelError naming the node) and returns the Model.");

  m.def(
      "save_model",
      [](const std::shared_ptr<Model>& model, py::handle path) {
        const std::string p = py::str(py::module_::import("os").attr("fspath")(path));
        save_model(model, p);
      },
      py::arg("model"), py::arg("path"), "Writes a model in troupe's .troupe format.");
}

}  // namespace troupe::python
