#include <pybind11/stl.h>

#include <condition_variable>
#include <deque>
#include <mutex>

#include "bindings.hpp"
#include "compiled_model.hpp"
#include "infer_request.hpp"
#include "troupe/properties.hpp"

namespace troupe::python {

namespace {

/// troupe.AsyncInferQueue: a pool of requests handed out as they become idle.
class AsyncInferQueue {
 public:
  AsyncInferQueue(CompiledModelHandle& compiled, size_t jobs) {
    if (jobs == 0)
      jobs = static_cast<size_t>(std::max<int64_t>(
          1, compiled.model().get_property(props::optimal_number_of_infer_requests).as_int()));
    for (size_t i = 0; i < jobs; ++i) {
      auto request = std::make_shared<InferRequestHandle>(compiled.model());
      py::object object = py::cast(request);
      // The state holds the request's Python object borrowed: the queue owns it and outlives
      // every callback (the destructor waits for them).
      request->set_native_callback([state = state_, i, object = object.ptr(),
                                    userdata = request->userdata()](std::exception_ptr error) {
        complete(*state, i, object, *userdata, error);
      });
      requests_.push_back(request);
      objects_.push_back(std::move(object));
      state_->idle.push_back(i);
    }
  }

  ~AsyncInferQueue() {
    // Dropped by its own callback: that request turns idle only after this returns.
    const size_t running_here = state_in_callback == state_.get() ? 1 : 0;
    py::gil_scoped_release release;
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->changed.wait(lock,
                         [&] { return state_->idle.size() + running_here == requests_.size(); });
  }

  void start_async(py::handle inputs, py::handle userdata, bool share_inputs) {
    drain_released_references();
    size_t i = take_idle_now();
    if (i == none_idle) {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(state_->mutex);
      state_->changed.wait(lock, [&] { return !state_->idle.empty(); });
      i = state_->idle.front();
      state_->idle.pop_front();
    }
    try {
      requests_[i]->start_async(inputs, userdata, share_inputs, true);
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(state_->mutex);
        state_->idle.push_front(i);
      }
      state_->changed.notify_all();
      throw;
    }
  }

  void wait_all() {
    std::exception_ptr first;
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(state_->mutex);
      state_->changed.wait(lock, [&] { return state_->idle.size() == requests_.size(); });
      if (!state_->errors.empty()) first = state_->errors.front();
      state_->errors.clear();
    }
    if (first) std::rethrow_exception(first);
  }

  size_t get_idle_request_id() {
    py::gil_scoped_release release;
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->changed.wait(lock, [&] { return !state_->idle.empty(); });
    return state_->idle.front();
  }

  bool is_ready() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return !state_->idle.empty();
  }

  void set_callback(py::handle callback) {
    SharedObject next;
    if (!callback.is_none()) next = SharedObject(py::reinterpret_borrow<py::object>(callback));
    std::lock_guard<std::mutex> lock(state_->mutex);
    std::swap(state_->callback, next);
  }

  size_t size() const { return requests_.size(); }
  py::object request(size_t i) const {
    if (i >= objects_.size()) throw py::index_error("AsyncInferQueue index out of range");
    return objects_[i];
  }
  py::list userdata() const {
    py::list out;
    for (const auto& r : requests_) out.append(r->userdata()->get());
    return out;
  }

 private:
  static constexpr size_t none_idle = static_cast<size_t>(-1);

  // An idle request without releasing the GIL (the mutex is never held by a thread that waits
  // for the GIL), or none_idle.
  size_t take_idle_now() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->idle.empty()) return none_idle;
    const size_t i = state_->idle.front();
    state_->idle.pop_front();
    return i;
  }

  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<size_t> idle;
    std::vector<std::exception_ptr> errors;  // failed runs since the last wait_all
    SharedObject callback;
  };

  // On troupe's callback actor: the Python callback (request, userdata), then the request is idle.
  static void complete(State& state, size_t i, PyObject* request, const SharedObject& userdata,
                       std::exception_ptr error) {
    SharedObject callback;
    {
      std::lock_guard<std::mutex> lock(state.mutex);
      callback = state.callback;
      if (error) state.errors.push_back(error);
    }
    if (callback) {
      state_in_callback = &state;
      call_python_callback(callback, "troupe.AsyncInferQueue callback",
                           [&](py::object& f) { f(py::handle(request), userdata.get()); });
      state_in_callback = nullptr;
    }
    {
      std::lock_guard<std::mutex> lock(state.mutex);
      state.idle.push_back(i);
    }
    state.changed.notify_all();
  }

  // The queue whose callback this thread runs, if any.
  static thread_local const State* state_in_callback;

  std::shared_ptr<State> state_ = std::make_shared<State>();
  std::vector<std::shared_ptr<InferRequestHandle>> requests_;
  std::vector<py::object> objects_;
};

thread_local const AsyncInferQueue::State* AsyncInferQueue::state_in_callback = nullptr;

}  // namespace

void bind_async_infer_queue(py::module_& m) {
  py::class_<AsyncInferQueue>(m, "AsyncInferQueue", R"doc(
A pool of InferRequests of one CompiledModel for throughput:

    queue = troupe.AsyncInferQueue(compiled, jobs=0)   # 0: OPTIMAL_NUMBER_OF_INFER_REQUESTS
    queue.set_callback(lambda request, userdata: results.append((userdata, request.results)))
    for i, image in enumerate(images):
        queue.start_async({"input": image}, userdata=i)  # waits for an idle request
    queue.wait_all()

The callback runs on troupe's thread with the GIL; an exception it raises is reported through
sys.unraisablehook and the other requests go on. wait_all raises the first error of a run that
failed since the last wait_all.
)doc")
      .def(py::init([](CompiledModelHandle& compiled, size_t jobs) {
             return std::make_unique<AsyncInferQueue>(compiled, jobs);
           }),
           py::arg("model"), py::arg("jobs") = 0)
      .def("start_async", &AsyncInferQueue::start_async, py::arg("inputs") = py::none(),
           py::arg("userdata") = py::none(), py::arg("share_inputs") = true,
           "Starts the next idle request (waiting for one with the GIL released).")
      .def("wait_all", &AsyncInferQueue::wait_all, "Waits until every request is idle.")
      .def("set_callback", &AsyncInferQueue::set_callback, py::arg("callback"),
           "callback(request, userdata) after each run; None removes it.")
      .def("is_ready", &AsyncInferQueue::is_ready, "True when a request is idle.")
      .def("get_idle_request_id", &AsyncInferQueue::get_idle_request_id,
           "The index of an idle request (waits for one).")
      .def_property_readonly("userdata", &AsyncInferQueue::userdata)
      .def("__len__", &AsyncInferQueue::size)
      .def("__getitem__", &AsyncInferQueue::request)
      .def("__iter__", [](const AsyncInferQueue& q) {
        py::list items;
        for (size_t i = 0; i < q.size(); ++i) items.append(q.request(i));
        return py::iter(items);
      });
}

}  // namespace troupe::python
