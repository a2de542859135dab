#include <pybind11/stl.h>

#include "bindings.hpp"
#include "troupe/error.hpp"
#include "troupe/pre_post_processor.hpp"

namespace troupe::python {

namespace {

// mean/scale take one value for every channel or a list of one per channel.
std::vector<float> per_channel(py::handle v) {
  if (py::isinstance<py::float_>(v) || py::isinstance<py::int_>(v)) return {v.cast<float>()};
  return v.cast<std::vector<float>>();
}

// OpenVINO writes layouts as strings ("NCHW"); troupe knows the two 4-D image layouts.
Layout layout_from_python(py::handle value) {
  if (py::isinstance<Layout>(value)) return value.cast<Layout>();
  std::string text = py::str(value);
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (text == "NCHW" || text == "[N,C,H,W]") return Layout::nchw;
  if (text == "NHWC" || text == "[N,H,W,C]") return Layout::nhwc;
  throw InvalidArgument("layout '" + std::string(py::str(value)) +
                        "' is not one troupe knows (NCHW, NHWC)");
}

}  // namespace

void bind_pre_post_processor(py::module_& m) {
  py::enum_<Layout>(m, "Layout", "Layout of a 4-D image tensor.")
      .value("NCHW", Layout::nchw)
      .value("NHWC", Layout::nhwc);
  py::enum_<ColorFormat>(m, "ColorFormat")
      .value("RGB", ColorFormat::rgb)
      .value("BGR", ColorFormat::bgr);
  py::enum_<ResizeAlgorithm>(m, "ResizeAlgorithm")
      .value("RESIZE_NEAREST", ResizeAlgorithm::nearest)
      .value("RESIZE_LINEAR", ResizeAlgorithm::linear);

  using PPP = PrePostProcessor;
  constexpr auto self = py::return_value_policy::reference_internal;
  py::class_<PPP::InputTensorInfo>(m, "InputTensorInfo", "What the caller feeds to an input.")
      .def("set_element_type", &PPP::InputTensorInfo::set_element_type, self)
      .def(
          "set_layout",
          [](PPP::InputTensorInfo& t, py::handle layout) -> PPP::InputTensorInfo& {
            return t.set_layout(layout_from_python(layout));
          },
          self)
      .def("set_color_format", &PPP::InputTensorInfo::set_color_format, self)
      .def("set_spatial_static_shape", &PPP::InputTensorInfo::set_spatial_static_shape, self,
           py::arg("height"), py::arg("width"));
  py::class_<PPP::PreprocessSteps>(m, "PreprocessSteps",
                                   "Steps run by the preprocess stage, in declaration order.")
      .def("convert_element_type", &PPP::PreprocessSteps::convert_element_type, self,
           py::arg("element_type") = ElementType::f32)
      .def(
          "convert_layout",
          [](PPP::PreprocessSteps& s, py::handle layout) -> PPP::PreprocessSteps& {
            return s.convert_layout(layout_from_python(layout));
          },
          self)
      .def("resize", &PPP::PreprocessSteps::resize, self)
      .def(
          "mean",
          [](PPP::PreprocessSteps& s, py::handle v) -> PPP::PreprocessSteps& {
            return s.mean(per_channel(v));
          },
          self, "One value per channel, or one for all.")
      .def(
          "scale",
          [](PPP::PreprocessSteps& s, py::handle v) -> PPP::PreprocessSteps& {
            return s.scale(per_channel(v));
          },
          self, "One value per channel, or one for all.")
      .def("reverse_channels", &PPP::PreprocessSteps::reverse_channels, self)
      .def("convert_color", &PPP::PreprocessSteps::convert_color, self);
  py::class_<PPP::ModelInfo>(m, "ModelInfo", "How the model sees an input or output.")
      .def(
          "set_layout",
          [](PPP::ModelInfo& i, py::handle layout) -> PPP::ModelInfo& {
            return i.set_layout(layout_from_python(layout));
          },
          self);
  py::class_<PPP::InputInfo>(m, "InputInfo")
      .def("tensor", &PPP::InputInfo::tensor, self)
      .def("preprocess", &PPP::InputInfo::preprocess, self)
      .def("model", &PPP::InputInfo::model, self);
  py::class_<PPP::OutputTensorInfo>(m, "OutputTensorInfo", "What the caller gets from an output.")
      .def("set_element_type", &PPP::OutputTensorInfo::set_element_type, self)
      .def(
          "set_layout",
          [](PPP::OutputTensorInfo& t, py::handle layout) -> PPP::OutputTensorInfo& {
            return t.set_layout(layout_from_python(layout));
          },
          self);
  py::class_<PPP::OutputInfo>(m, "OutputInfo")
      .def("tensor", &PPP::OutputInfo::tensor, self)
      .def("model", &PPP::OutputInfo::model, self);

  py::class_<PPP>(m, "PrePostProcessor", R"doc(
Declares what the caller feeds and gets; the steps run in troupe's pre/postprocess stages:

    ppp = troupe.PrePostProcessor(model)
    ppp.input("image").tensor().set_element_type(troupe.Type.u8).set_layout("NHWC")
    ppp.input("image").preprocess().convert_element_type(troupe.Type.f32).mean([123.7, 116.3, 103.5])
    ppp.output(0).tensor().set_element_type(troupe.Type.f16)
    model = ppp.build()
)doc")
      .def(py::init([](std::shared_ptr<Model> model) {
             return std::make_unique<PPP>(std::move(model));
           }),
           py::arg("model"))
      .def("input", py::overload_cast<size_t>(&PPP::input), self, py::arg("index") = 0)
      .def("input", py::overload_cast<const std::string&>(&PPP::input), self, py::arg("name"))
      .def("output", py::overload_cast<size_t>(&PPP::output), self, py::arg("index") = 0)
      .def("output", py::overload_cast<const std::string&>(&PPP::output), self, py::arg("name"))
      .def("build", &PPP::build,
           "A copy of the model with the processing attached (raises InvalidArgument naming the "
           "input when the steps cannot produce it).");
}

}  // namespace troupe::python
