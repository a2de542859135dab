#include <pybind11/stl.h>

#include "bindings.hpp"
#include "troupe/element_type.hpp"
#include "troupe/properties.hpp"

namespace troupe::python {

Any any_from_python(const std::string& key, py::handle value) {
  if (py::isinstance<py::bool_>(value)) return Any(value.cast<bool>());
  if (py::isinstance<py::int_>(value)) return Any(value.cast<int64_t>());
  if (py::isinstance<py::float_>(value)) return Any(value.cast<double>());
  // str and str-based enums (troupe.properties.hint.PerformanceMode) by their text.
  if (py::isinstance<py::str>(value)) return Any(value.cast<std::string>());
  if (py::isinstance<ElementType>(value))
    return Any(std::string(to_string(value.cast<ElementType>())));
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    std::vector<std::string> items;
    for (py::handle item : value) {
      if (!py::isinstance<py::str>(item))
        throw py::type_error("property '" + key + "': a list value must hold str items, not " +
                             std::string(py::str(item.get_type().attr("__name__"))));
      items.push_back(item.cast<std::string>());
    }
    return Any(std::move(items));
  }
  throw py::type_error("property '" + key + "': a value of type " +
                       std::string(py::str(value.get_type().attr("__name__"))) +
                       " is not a property value (bool, int, float, str or list of str)");
}

AnyMap any_map_from_python(py::handle properties) {
  AnyMap out;
  if (properties.is_none()) return out;
  if (!py::isinstance<py::dict>(properties))
    throw py::type_error("properties must be a dict of name -> value, not " +
                         std::string(py::str(properties.get_type().attr("__name__"))));
  for (auto [key, value] : py::reinterpret_borrow<py::dict>(properties)) {
    // Keys may be strings or the callables of troupe.properties (str() gives the name).
    const std::string name = py::str(key);
    out[name] = any_from_python(name, value);
  }
  return out;
}

py::object any_to_python(const Any& value) {
  return std::visit(
      [](const auto& v) -> py::object {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>)
          return py::none();
        else
          return py::cast(v);
      },
      value.storage());
}

void bind_properties(py::module_& m) {
  // The names from troupe/properties.hpp; troupe/properties.py builds OpenVINO's callables on them.
  py::dict names;
  names["supported_properties"] = props::supported_properties;
  names["available_devices"] = props::available_devices;
  names["device_full_name"] = props::device_full_name;
  names["device_capabilities"] = props::device_capabilities;
  names["range_for_async_infer_requests"] = props::range_for_async_infer_requests;
  names["device_id"] = props::device_id;
  names["enable_profiling"] = props::enable_profiling;
  names["num_streams"] = props::num_streams;
  names["inference_num_threads"] = props::inference_num_threads;
  names["performance_mode"] = props::performance_mode;
  names["num_requests"] = props::num_requests;
  names["disable_transformations"] = props::disable_transformations;
  names["exclusive_async_requests"] = props::exclusive_async_requests;
  names["inference_precision"] = props::inference_precision;
  names["max_requests_in_flight"] = props::max_requests_in_flight;
  names["auto_batch_max_size"] = props::auto_batch_max_size;
  names["cache_dir"] = props::cache_dir;
  names["model_name"] = props::model_name;
  names["optimal_number_of_infer_requests"] = props::optimal_number_of_infer_requests;
  names["execution_devices"] = props::execution_devices;
  names["loaded_from_cache"] = props::loaded_from_cache;
  m.attr("_property_names") = names;
}

}  // namespace troupe::python
