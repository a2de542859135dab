#include "python_state.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace troupe::python {

namespace {

std::mutex released_mutex;
std::vector<PyObject*> released;  // guarded by released_mutex
std::atomic<bool> have_released{false};

std::atomic<bool> exiting{false};
std::atomic<int> callbacks_inside{0};
std::atomic<int64_t> runs_in_flight{0};

}  // namespace

void release_reference(PyObject* object) {
  if (!object) return;
  if (Py_IsInitialized() && PyGILState_Check()) {
    Py_DECREF(object);
    return;
  }
  std::lock_guard<std::mutex> lock(released_mutex);
  released.push_back(object);
  have_released.store(true, std::memory_order_release);
}

void drain_released_references() {
  if (!have_released.load(std::memory_order_acquire)) return;
  std::vector<PyObject*> batch;
  {
    std::lock_guard<std::mutex> lock(released_mutex);
    batch.swap(released);
    have_released.store(false, std::memory_order_release);
  }
  for (PyObject* object : batch) Py_DECREF(object);
}

std::shared_ptr<void> share_object(py::object object) {
  return std::shared_ptr<void>(object.release().ptr(),
                               [](void* p) { release_reference(static_cast<PyObject*>(p)); });
}

bool enter_python() {
  // Counted before the flag is read: on_interpreter_exit sets the flag, then waits for the count
  // to drop, so a callback that saw the flag clear is always waited for.
  callbacks_inside.fetch_add(1);
  if (exiting.load()) {
    callbacks_inside.fetch_sub(1);
    return false;
  }
  return true;
}

void leave_python() {
  callbacks_inside.fetch_sub(1);
}

void run_started() {
  runs_in_flight.fetch_add(1);
}
void run_finished() {
  runs_in_flight.fetch_sub(1);
}

void on_interpreter_exit() {
  exiting.store(true);
  py::gil_scoped_release release;
  // Bounded: a callback stuck in user code must not hang the interpreter's exit forever.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((callbacks_inside.load() > 0 || runs_in_flight.load() > 0) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void report_callback_error(py::error_already_set& error, const char* where) {
  error.discard_as_unraisable(where);
}

}  // namespace troupe::python
