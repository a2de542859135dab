#include <pybind11/stl.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "bindings.hpp"
#include "compiled_model.hpp"
#include "infer_request.hpp"
#include "troupe/properties.hpp"

namespace troupe::python {

namespace {

/// troupe.AsyncInferQueue: a pool of requests and a bounded buffer of jobs. start_async starts an
/// idle request, or leaves the job (its inputs already made tensors) in the buffer; a request that
/// completes takes the next job itself, on troupe's thread, so a full queue runs without a thread
/// hand-off per request (as `troupe bench` restarts requests from their callbacks). The caller
/// waits only while the buffer is full.
class AsyncInferQueue {
 public:
  AsyncInferQueue(CompiledModelHandle& compiled, size_t jobs) {
    if (jobs == 0)
      jobs = static_cast<size_t>(std::max<int64_t>(
          1, compiled.model().get_property(props::optimal_number_of_infer_requests).as_int()));
    state_->capacity = std::max<size_t>(16, 4 * jobs);
    for (size_t i = 0; i < jobs; ++i) {
      auto request = std::make_shared<InferRequestHandle>(compiled.model());
      py::object object = py::cast(request);
      // The state holds the request borrowed: the queue owns it and outlives every callback that
      // may restart it (the destructor waits for them).
      state_->requests.push_back(request.get());
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
    std::deque<Job> dropped;
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(state_->mutex);
      if (state_in_callback == state_.get()) {
        // Dropped by its own callback: that request turns idle only after this returns, and must
        // not take a job from a queue that is gone. Jobs not started are dropped.
        state_->closing = true;
        dropped.swap(state_->pending);
        state_->wait(lock, [&] { return state_->idle.size() + 1 == requests_.size(); });
      } else {
        state_->wait(lock, [&] { return state_->all_idle(); });
      }
    }
  }

  void start_async(py::handle inputs, py::handle userdata, bool share_inputs) {
    drain_released_references();
    Job job;
    job.inputs = requests_.front()->input_tensors(inputs, share_inputs, &input_cache_);
    if (!userdata.is_none())  // an empty SharedObject reads as None
      job.userdata = SharedObject(py::reinterpret_borrow<py::object>(userdata));
    size_t i = none_idle;
    // Starts the job on an idle request (returned in i) or buffers it; under the mutex.
    auto place = [&] {
      if (!state_->idle.empty()) {
        i = state_->idle.front();
        state_->idle.pop_front();
        if (!state_->pending.empty()) {  // keep the order: the oldest job first
          state_->pending.push_back(std::move(job));
          job = std::move(state_->pending.front());
          state_->pending.pop_front();
        }
      } else {
        state_->pending.push_back(std::move(job));
      }
    };
    std::unique_lock<std::mutex> lock(state_->mutex);
    if (state_->idle.empty() && state_->pending.size() >= state_->capacity) {
      // Full: wait (GIL released) until half the buffer has drained, so the caller wakes once
      // per several jobs rather than once per job.
      lock.unlock();
      py::gil_scoped_release release;
      lock.lock();
      state_->wait(lock, [&] {
        return !state_->idle.empty() || state_->pending.size() <= state_->capacity / 2;
      });
      place();
      // The mutex goes before the GIL comes back: another producer may hold the GIL while it
      // waits for the mutex.
      lock.unlock();
    } else {
      place();
      lock.unlock();
    }
    if (i != none_idle) state_->start(i, std::move(job));
  }

  void wait_all() {
    std::exception_ptr first;
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(state_->mutex);
      state_->wait(lock, [&] { return state_->all_idle(); });
      if (!state_->errors.empty()) first = state_->errors.front();
      state_->errors.clear();
    }
    if (first) std::rethrow_exception(first);
  }

  size_t get_idle_request_id() {
    py::gil_scoped_release release;
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->wait(lock, [&] { return !state_->idle.empty(); });
    return state_->idle.front();
  }

  bool is_ready() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return !state_->idle.empty();
  }

  void set_callback(py::handle callback) {
    SharedObject next;
    if (!callback.is_none()) next = SharedObject(py::reinterpret_borrow<py::object>(callback));
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      std::swap(state_->callback, next);
    }
    // The previous callback is released here, outside the lock.
  }

  size_t size() const { return requests_.size(); }
  py::object request(size_t i) const {
    if (i >= objects_.size()) throw py::index_error("AsyncInferQueue index out of range");
    return objects_[i];
  }
  py::list userdata() const {
    std::vector<SharedObject> values;
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      for (const auto& r : requests_) values.push_back(*r->userdata());
    }
    py::list out;
    for (const auto& v : values) out.append(v.get());
    return out;
  }

 private:
  static constexpr size_t none_idle = static_cast<size_t>(-1);

  struct Job {
    std::vector<std::pair<size_t, Tensor>> inputs;
    SharedObject userdata;
  };

  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<InferRequestHandle*> requests;  // borrowed from the queue
    std::deque<size_t> idle;
    std::deque<Job> pending;
    size_t capacity = 16;
    int waiters = 0;  // threads in wait(): completions notify only when there is one
    bool closing = false;
    std::vector<std::exception_ptr> errors;  // failed runs since the last wait_all
    SharedObject callback;

    bool all_idle() const { return pending.empty() && idle.size() == requests.size(); }

    template <class Predicate>
    void wait(std::unique_lock<std::mutex>& lock, Predicate ready) {
      ++waiters;
      changed.wait(lock, ready);
      --waiters;
    }

    // Binds a job's inputs to request i and starts it; on troupe's thread or the caller's. A
    // job that cannot start is recorded as an error and the request takes the next one.
    void start(size_t i, Job job) {
      while (true) {
        InferRequestHandle& handle = *requests[i];
        try {
          for (auto& [index, tensor] : job.inputs) handle.request().set_input_tensor(index, tensor);
          handle.forget_bound_inputs();
          {
            std::lock_guard<std::mutex> lock(mutex);
            std::swap(*handle.userdata(), job.userdata);
          }
          job = Job();  // the previous userdata and the tensors go outside the lock
          handle.start_counted();
          return;
        } catch (...) {
          std::lock_guard<std::mutex> lock(mutex);
          errors.push_back(std::current_exception());
        }
        if (!next_job(i, job)) return;
      }
    }

    // The next job for request i, or false after marking it idle.
    bool next_job(size_t i, Job& job) {
      bool got = false;
      bool notify = false;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (!closing && !pending.empty()) {
          job = std::move(pending.front());
          pending.pop_front();
          got = true;
        } else {
          idle.push_back(i);
        }
        // Wake waiters only when what one of them waits for can have come true: a request
        // turned idle (start_async, wait_all, get_idle_request_id, the destructor), or the
        // buffer drained to the half start_async waits for. Waking on every completion would
        // wake a waiting producer once per job instead of once per half buffer.
        notify = waiters > 0 && (!got || pending.size() == capacity / 2);
      }
      if (notify) changed.notify_all();
      return got;
    }
  };

  // On troupe's callback actor: the Python callback (request, userdata), then the request takes
  // the next job or turns idle.
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
    Job job;
    if (state.next_job(i, job)) state.start(i, std::move(job));
  }

  // The queue whose callback this thread runs, if any.
  static thread_local const State* state_in_callback;

  std::shared_ptr<State> state_ = std::make_shared<State>();
  std::vector<std::shared_ptr<InferRequestHandle>> requests_;
  std::vector<py::object> objects_;
  InferRequestHandle::InputCache input_cache_;  // start_async's, with the GIL
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

start_async checks and wraps the inputs at once (a bad input raises here, naming it) and returns
when an idle request started the job or a buffer of 4 x jobs (at least 16) took it; a completing
request starts the next buffered job itself. The callback runs on troupe's thread with the GIL;
an exception it raises is reported through sys.unraisablehook and the other requests go on.
wait_all waits for the buffer and every request, then raises the first error of a run that
failed since the last wait_all.
)doc")
      .def(py::init([](CompiledModelHandle& compiled, size_t jobs) {
             return std::make_unique<AsyncInferQueue>(compiled, jobs);
           }),
           py::arg("model"), py::arg("jobs") = 0)
      .def("start_async", &AsyncInferQueue::start_async, py::arg("inputs") = py::none(),
           py::arg("userdata") = py::none(), py::arg("share_inputs") = true,
           "Starts the job on an idle request or buffers it (waiting, GIL released, while the "
           "buffer is full).")
      .def("wait_all", &AsyncInferQueue::wait_all,
           "Waits until every buffered job has run and every request is idle.")
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
