#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "troupe/any.hpp"
#include "troupe/model.hpp"

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

/// The position in `values` (a model's inputs or outputs) that `key` names: an index, a name or a
/// ValueInfo. Throws InvalidArgument naming the key and, for a name, the ones there are; `what` is
/// "input" or "output".
size_t index_of(py::handle key, const std::vector<ValueInfo>& values, const char* what);

}  // namespace troupe::python
