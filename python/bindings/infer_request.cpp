#include "infer_request.hpp"

#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "numpy_tensor.hpp"
#include "troupe/error.hpp"

namespace troupe::python {

namespace {

std::string known(const std::vector<ValueInfo>& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "'" : ", '") + v.name + "'";
  return out.empty() ? "none" : out;
}

// Runs a Python callable on a troupe thread; a raised exception is reported, never propagated.
void call_from_troupe(const SharedObject& callable, const char* where,
                      const std::function<void(py::object&)>& invoke) {
  if (!enter_python()) return;
  {
    py::gil_scoped_acquire gil;
    try {
      py::object fn = callable.get();
      invoke(fn);
    } catch (py::error_already_set& e) {
      report_callback_error(e, where);
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
      PyErr_WriteUnraisable(callable.get().ptr());
    }
  }
  leave_python();
}

}  // namespace

size_t index_of(py::handle key, const std::vector<ValueInfo>& values, const char* what) {
  if (py::isinstance<py::int_>(key)) {
    const auto i = key.cast<int64_t>();
    if (i < 0 || static_cast<size_t>(i) >= values.size())
      throw InvalidArgument(std::string(what) + " index " + std::to_string(i) +
                            " out of range: the model has " + std::to_string(values.size()) + " " +
                            what + "s");
    return static_cast<size_t>(i);
  }
  const std::string name =
      py::isinstance<ValueInfo>(key) ? key.cast<const ValueInfo&>().name : key.cast<std::string>();
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].name == name) return i;
  throw InvalidArgument("the model has no " + std::string(what) + " named '" + name + "' (" + what +
                        "s: " + known(values) + ")");
}

InferRequestHandle::InferRequestHandle(CompiledModel& model)
    : request_(model.create_infer_request()),
      bound_(model.inputs().size()),
      inputs_(model.inputs()),
      outputs_(model.outputs()) {
  install_callback(SharedObject());
}

void InferRequestHandle::install_callback(SharedObject callback) {
  // Always installed, also without a Python callback: it ends the run's count (run_finished).
  std::shared_ptr<SharedObject> data = userdata_;
  request_.set_callback([callback, data](std::exception_ptr) {
    if (callback)
      call_from_troupe(callback, "troupe.InferRequest callback",
                       [&](py::object& f) { f(data->get()); });
    run_finished();
  });
}

InferRequestHandle::BoundArray InferRequestHandle::describe_array(py::handle value) {
  BoundArray b;
  if (!py::isinstance<py::array>(value)) return b;
  auto array = py::reinterpret_borrow<py::array>(value);
  b.array = value.ptr();
  b.data = array.data();
  b.dtype = array.dtype().ptr();
  b.shape.assign(array.shape(), array.shape() + array.ndim());
  return b;
}

bool InferRequestHandle::BoundArray::same_as(py::handle value) const {
  if (!array || array != value.ptr()) return false;
  const BoundArray now = describe_array(value);
  return now.data == data && now.dtype == dtype && now.shape == shape;
}

void InferRequestHandle::bind_input(size_t index, py::handle value, bool share) {
  if (bound_stale_.exchange(false))
    for (auto& b : bound_) b = BoundArray();
  BoundArray& bound = bound_[index];
  if (share && bound.same_as(value)) return;
  bool wrapped = false;
  Tensor tensor = tensor_from_python(value, inputs_[index], share, &wrapped);
  request_.set_input_tensor(index, tensor);
  bound = wrapped ? describe_array(value) : BoundArray();
}

void InferRequestHandle::bind_output(size_t index, py::handle value) {
  request_.set_output_tensor(index, tensor_from_python(value, outputs_[index], true));
}

void InferRequestHandle::start_counted() {
  run_started();
  try {
    request_.start_async();
  } catch (...) {
    run_finished();  // not started: no completion will come
    throw;
  }
}

InferRequestHandle::~InferRequestHandle() {
  py::gil_scoped_release release;
  request_ = InferRequest();
}

size_t InferRequestHandle::input_index(py::handle key) const {
  return index_of(key, inputs_, "input");
}
size_t InferRequestHandle::output_index(py::handle key) const {
  return index_of(key, outputs_, "output");
}

void InferRequestHandle::for_each_input(py::handle inputs,
                                        const std::function<void(size_t, py::handle)>& bind) const {
  if (inputs.is_none()) return;
  if (py::isinstance<py::dict>(inputs)) {
    for (auto [key, value] : py::reinterpret_borrow<py::dict>(inputs))
      bind(input_index(key), value);
  } else if (py::isinstance<py::list>(inputs) || py::isinstance<py::tuple>(inputs)) {
    auto seq = py::reinterpret_borrow<py::sequence>(inputs);
    if (seq.size() > inputs_.size())
      throw InvalidArgument(std::to_string(seq.size()) + " inputs given; the model has " +
                            std::to_string(inputs_.size()) + " (" + known(inputs_) + ")");
    for (size_t i = 0; i < seq.size(); ++i) bind(i, seq[i]);
  } else {
    if (inputs_.empty()) throw InvalidArgument("the model has no inputs");
    bind(0, inputs);
  }
}

void InferRequestHandle::set_inputs(py::handle inputs, bool share) {
  drain_released_references();
  for_each_input(inputs, [&](size_t i, py::handle value) { bind_input(i, value, share); });
}

std::vector<std::pair<size_t, Tensor>> InferRequestHandle::input_tensors(py::handle inputs,
                                                                         bool share,
                                                                         InputCache* cache) const {
  std::vector<std::pair<size_t, Tensor>> out;
  if (cache) cache->resize(inputs_.size());
  for_each_input(inputs, [&](size_t i, py::handle value) {
    if (cache && share && (*cache)[i].first.same_as(value)) {
      out.emplace_back(i, (*cache)[i].second);
      return;
    }
    bool wrapped = false;
    Tensor tensor = tensor_from_python(value, inputs_[i], share, &wrapped);
    // The checks set_input_tensor makes, made here: the tensor may be bound on troupe's thread.
    const ValueInfo& info = inputs_[i];
    if (!info.shape.accepts(tensor.shape()))
      throw TensorMismatch("input '" + info.name + "': tensor of shape " +
                           tensor.shape().to_string() + " does not fit the model's shape " +
                           info.shape.to_string());
    if (!is_convertible(tensor.element_type(), info.type))
      throw TensorMismatch("input '" + info.name + "': element type " +
                           std::string(to_string(tensor.element_type())) +
                           " cannot be converted to the model's " +
                           std::string(to_string(info.type)));
    if (cache)
      (*cache)[i] = wrapped ? std::make_pair(describe_array(value), tensor)
                            : std::make_pair(BoundArray(), Tensor());
    out.emplace_back(i, std::move(tensor));
  });
  return out;
}

py::dict InferRequestHandle::results(bool share) const {
  py::dict out;
  for (size_t i = 0; i < outputs_.size(); ++i)
    out[py::str(outputs_[i].name)] = array_from_tensor(request_.get_output_tensor(i), share);
  return out;
}

py::dict InferRequestHandle::infer(py::handle inputs, bool share_inputs, bool share_outputs) {
  set_inputs(inputs, share_inputs);
  {
    py::gil_scoped_release release;
    // The synchronous run (no callback, as OpenVINO's): alone in the pipeline, this thread takes
    // it through the stages itself instead of waking troupe's callback thread to end it.
    run_started();
    try {
      request_.infer();
    } catch (...) {
      run_finished();
      throw;
    }
    run_finished();
  }
  return results(share_outputs);
}

void InferRequestHandle::start_async(py::handle inputs, py::handle userdata, bool share_inputs,
                                     bool reset_userdata) {
  set_inputs(inputs, share_inputs);
  if (reset_userdata || !userdata.is_none())
    *userdata_ = SharedObject(py::reinterpret_borrow<py::object>(userdata));
  py::gil_scoped_release release;
  start_counted();
}

void InferRequestHandle::wait() {
  py::gil_scoped_release release;
  request_.wait();
}

bool InferRequestHandle::wait_for(int64_t timeout_ms) {
  py::gil_scoped_release release;
  return request_.wait_for(std::chrono::milliseconds(timeout_ms));
}

void InferRequestHandle::set_callback(py::handle callback, py::handle userdata) {
  if (callback.is_none()) {
    install_callback(SharedObject());
    return;
  }
  if (!userdata.is_none()) *userdata_ = SharedObject(py::reinterpret_borrow<py::object>(userdata));
  install_callback(SharedObject(py::reinterpret_borrow<py::object>(callback)));
}

void InferRequestHandle::set_native_callback(std::function<void(std::exception_ptr)> callback) {
  request_.set_callback([callback = std::move(callback)](std::exception_ptr error) {
    callback(error);
    run_finished();
  });
}

void InferRequestHandle::cancel() {
  py::gil_scoped_release release;
  request_.cancel();
}

void call_python_callback(const SharedObject& callable, const char* where,
                          const std::function<void(py::object&)>& invoke) {
  call_from_troupe(callable, where, invoke);
}

void bind_infer_request(py::module_& m) {
  py::enum_<ProfilingInfo::Status>(m, "ProfilingStatus")
      .value("NOT_RUN", ProfilingInfo::Status::not_run)
      .value("OPTIMIZED_OUT", ProfilingInfo::Status::optimized_out)
      .value("EXECUTED", ProfilingInfo::Status::executed);
  py::class_<ProfilingInfo>(m, "ProfilingInfo",
                            "A pipeline stage or an executed node of the last completed run.")
      .def_readonly("name", &ProfilingInfo::name)
      .def_readonly("status", &ProfilingInfo::status)
      .def_readonly("real_time_us", &ProfilingInfo::real_time_us)
      .def_readonly("cpu_time_us", &ProfilingInfo::cpu_time_us)
      .def_readonly("exec_type", &ProfilingInfo::exec_type)
      .def_readonly("node_type", &ProfilingInfo::node_type)
      .def_readonly("queue_us", &ProfilingInfo::queue_us)
      .def_readonly("batch_size", &ProfilingInfo::batch_size)
      .def("__repr__", [](const ProfilingInfo& p) {
        return "<troupe.ProfilingInfo '" + p.name + "' " + p.node_type + " " +
               std::to_string(p.real_time_us) + " us>";
      });

  using Handle = InferRequestHandle;
  py::class_<Handle, std::shared_ptr<Handle>>(m, "InferRequest", R"doc(
One inference of a CompiledModel, run synchronously (infer) or asynchronously (start_async, then
wait or a callback). Inputs are a dict (name, index or ValueInfo -> array), a list by position or
one array. A C-contiguous, aligned array of a troupe dtype is used in place unless
share_inputs=False; outputs are copies unless share_outputs=True (then views of the request's
output tensors, which the next run overwrites).
)doc")
      .def("infer", &Handle::infer, py::arg("inputs") = py::none(), py::arg("share_inputs") = true,
           py::arg("share_outputs") = false,
           "Runs to completion (GIL released) and returns output name -> array; raises the "
           "request's error.")
      .def(
          "start_async",
          [](Handle& h, py::handle inputs, py::handle userdata, bool share_inputs) {
            h.start_async(inputs, userdata, share_inputs);
          },
          py::arg("inputs") = py::none(), py::arg("userdata") = py::none(),
          py::arg("share_inputs") = true,
          "Sends the request into the pipeline and returns at once; `userdata` (when not None) "
          "goes to the callback.")
      .def("wait", &Handle::wait, "Blocks (GIL released) until complete; raises its error.")
      .def("wait_for", &Handle::wait_for, py::arg("timeout"),
           "Waits at most `timeout` milliseconds; True when complete.")
      .def("set_callback", &Handle::set_callback, py::arg("callback"),
           py::arg("userdata") = py::none(),
           "callback(userdata) runs on troupe's thread (with the GIL) when a run started by "
           "start_async completes (not after infer, as in OpenVINO). An "
           "exception it raises is reported through sys.unraisablehook and does not affect other "
           "requests. None removes it.")
      .def("cancel", &Handle::cancel, "Cancels the run; wait() then raises Cancelled.")
      .def(
          "get_tensor",
          [](Handle& h, py::handle key) {
            if (py::isinstance<ValueInfo>(key))
              return h.request().get_tensor(key.cast<const ValueInfo&>().name);
            return h.request().get_tensor(key.cast<std::string>());
          },
          py::arg("name"), "The tensor bound to an input or output, by name or ValueInfo.")
      .def(
          "set_tensor",
          [](Handle& h, py::handle key, py::handle value) {
            drain_released_references();
            const std::string name = py::isinstance<ValueInfo>(key)
                                         ? key.cast<const ValueInfo&>().name
                                         : key.cast<std::string>();
            for (size_t i = 0; i < h.inputs().size(); ++i)
              if (h.inputs()[i].name == name) return h.bind_input(i, value, true);
            for (size_t i = 0; i < h.outputs().size(); ++i)
              if (h.outputs()[i].name == name) return h.bind_output(i, value);
            h.request().set_tensor(name, Tensor());  // raises, naming the known tensors
          },
          py::arg("name"), py::arg("tensor"),
          "Binds a Tensor or array (shared, not copied) to an input or output. An output array "
          "receives the results in place.")
      .def(
          "get_input_tensor", [](Handle& h, size_t i) { return h.request().get_input_tensor(i); },
          py::arg("index") = 0)
      .def(
          "get_output_tensor", [](Handle& h, size_t i) { return h.request().get_output_tensor(i); },
          py::arg("index") = 0)
      .def(
          "set_input_tensor",
          [](Handle& h, size_t i, py::handle value) {
            drain_released_references();
            if (i >= h.inputs().size()) h.input_index(py::int_(i));  // raises
            h.bind_input(i, value, true);
          },
          py::arg("index"), py::arg("tensor"))
      .def(
          "set_output_tensor",
          [](Handle& h, size_t i, py::handle value) {
            drain_released_references();
            if (i >= h.outputs().size()) h.output_index(py::int_(i));  // raises
            h.bind_output(i, value);
          },
          py::arg("index"), py::arg("tensor"))
      .def_property_readonly(
          "results", [](const Handle& h) { return h.results(false); },
          "Output name -> array (copies) of the last run.")
      .def("get_results", &Handle::results, py::arg("share_outputs") = false)
      .def_property_readonly(
          "userdata", [](const Handle& h) { return h.userdata()->get(); },
          "The userdata of the last start_async or set_callback.")
      .def_property_readonly("profiling_info",
                             [](const Handle& h) { return h.request().profiling_info(); })
      .def("get_profiling_info", [](const Handle& h) { return h.request().profiling_info(); })
      .def_property_readonly("inputs", [](const Handle& h) { return h.inputs(); })
      .def_property_readonly("outputs", [](const Handle& h) { return h.outputs(); })
      .def(
          "_time_cpp_infer",
          [](Handle& h, size_t runs) {
            // For benchmarks/python/overhead.py: the same request's C++ infer() timed in a loop
            // without Python in between (the inputs stay bound), in nanoseconds per run.
            std::vector<int64_t> ns;
            ns.reserve(runs);
            py::gil_scoped_release release;
            for (size_t i = 0; i < runs; ++i) {
              const auto start = std::chrono::steady_clock::now();
              h.request().infer();
              ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now() - start)
                               .count());
            }
            return ns;
          },
          py::arg("runs"))
      .def(
          "set_priority", [](Handle& h, int64_t p) { h.request().set_priority(p); },
          py::arg("priority"), "Scheduling priority of the next runs (1 highest; 0 default).")
      .def(
          "set_timeout",
          [](Handle& h, int64_t us) { h.request().set_timeout(std::chrono::microseconds(us)); },
          py::arg("microseconds"), "Queue timeout of the next runs (0: the model's default).");
}

}  // namespace troupe::python
