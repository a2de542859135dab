#pragma once

#include <pybind11/pybind11.h>

#include "troupe/any.hpp"

namespace troupe::python {

namespace py = pybind11;

// One function per concept, called in this order by module.cpp.
void bind_errors(py::module_& m);
void bind_properties(py::module_& m);
void bind_tensor(py::module_& m);
void bind_model(py::module_& m);
void bind_pre_post_processor(py::module_& m);
void bind_infer_request(py::module_& m);
void bind_compiled_model(py::module_& m);
void bind_async_infer_queue(py::module_& m);
void bind_core(py::module_& m);

/// A property value from Python: bool, int, float, str (str enums by value), a list of str, or a
/// troupe.Type (by its name). Throws TypeError naming `key`.
Any any_from_python(const std::string& key, py::handle value);
/// A property map from a dict (None is empty).
AnyMap any_map_from_python(py::handle properties);
py::object any_to_python(const Any& value);

}  // namespace troupe::python
