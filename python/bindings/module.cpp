#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "python_state.hpp"
#include "troupe/version.hpp"

PYBIND11_MODULE(_troupe, m) {
  namespace tp = troupe::python;
  m.doc() = "troupe's C++ API; import it as `troupe`.";
  m.attr("__version__") = troupe::library_version;
  tp::bind_errors(m);
  tp::bind_properties(m);
  tp::bind_model(m);
  tp::bind_tensor(m);
  tp::bind_pre_post_processor(m);
  tp::bind_infer_request(m);
  tp::bind_compiled_model(m);
  tp::bind_async_infer_queue(m);
  tp::bind_core(m);
  // Callbacks stop before the interpreter finalizes (see on_interpreter_exit).
  pybind11::module_::import("atexit").attr("register")(
      pybind11::cpp_function(&tp::on_interpreter_exit));
}
