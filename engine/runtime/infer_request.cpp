#include "troupe/infer_request.hpp"

#include <algorithm>

#include "actors/request_state.hpp"
#include "actors/tensor_checks.hpp"
#include "engine/runtime/compiled_model_impl.hpp"
#include "troupe/error.hpp"

namespace troupe {

namespace {

detail::RequestState& checked(const std::shared_ptr<detail::RequestState>& state) {
  if (!state) throw InvalidArgument("use of an empty InferRequest");
  return *state;
}

// Throws Busy while the request is in flight; the lock keeps it idle during the access. A
// request whose callback is running is idle: the callback may read its outputs and restart it.
std::unique_lock<std::mutex> lock_idle(detail::RequestState& st, const char* what) {
  std::unique_lock<std::mutex> lock(st.mutex);
  if (st.busy) throw Busy(std::string("infer request is busy: cannot ") + what + " while it runs");
  return lock;
}

std::string known_names(const std::vector<ValueInfo>& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "'" : ", '") + v.name + "'";
  return out.empty() ? "none" : out;
}

// Where a tensor name is bound: (true, i) for input i, (false, i) for output i.
std::pair<bool, size_t> locate(const detail::CompiledModelImpl& model, const std::string& name) {
  const auto& ins = model.inputs();
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i].name == name) return {true, i};
  const auto& outs = model.outputs();
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].name == name) return {false, i};
  throw InvalidArgument("the model has no input or output named '" + name +
                        "' (inputs: " + known_names(ins) + "; outputs: " + known_names(outs) + ")");
}

// Where a request's execute span ran: a stream here, or (a remote model) the replica it went to.
std::string execute_place(detail::CompiledModelImpl& model, int32_t worker) {
  const auto& remote = model.context().remote;
  if (!remote) return "stream " + std::to_string(worker);
  if (worker < 0 || static_cast<size_t>(worker) >= remote->replicas.size()) return "remote";
  return "remote " + remote->replicas[static_cast<size_t>(worker)].label;
}

}  // namespace

InferRequest::InferRequest(std::shared_ptr<detail::CompiledModelImpl> model,
                           std::shared_ptr<detail::RequestState> state)
    : model_(std::move(model)), state_(std::move(state)) {}

void InferRequest::set_tensor(const std::string& name, const Tensor& tensor) {
  checked(state_);
  const auto [is_input, index] = locate(*model_, name);
  is_input ? set_input_tensor(index, tensor) : set_output_tensor(index, tensor);
}

void InferRequest::set_input_tensor(size_t index, const Tensor& tensor) {
  auto& st = checked(state_);
  const auto& ins = model_->inputs();
  if (index >= ins.size())
    throw InvalidArgument("input index " + std::to_string(index) + " out of range: the model has " +
                          std::to_string(ins.size()) + " inputs");
  actors::check_tensor_fits("input", ins[index], tensor);
  auto lock = lock_idle(st, "set a tensor");
  st.inputs[index] = tensor;
}

void InferRequest::set_output_tensor(size_t index, const Tensor& tensor) {
  auto& st = checked(state_);
  const auto& outs = model_->outputs();
  if (index >= outs.size())
    throw InvalidArgument("output index " + std::to_string(index) +
                          " out of range: the model has " + std::to_string(outs.size()) +
                          " outputs");
  actors::check_tensor_fits("output", outs[index], tensor);
  auto lock = lock_idle(st, "set a tensor");
  st.outputs[index] = tensor;
  st.caller_output[index] = true;
}

Tensor InferRequest::get_tensor(const std::string& name) const {
  checked(state_);
  const auto [is_input, index] = locate(*model_, name);
  return is_input ? get_input_tensor(index) : get_output_tensor(index);
}

Tensor InferRequest::get_input_tensor(size_t index) const {
  auto& st = checked(state_);
  if (index >= model_->inputs().size())
    throw InvalidArgument("input index " + std::to_string(index) + " out of range: the model has " +
                          std::to_string(model_->inputs().size()) + " inputs");
  auto lock = lock_idle(st, "get a tensor");
  return st.inputs[index];
}

Tensor InferRequest::get_output_tensor(size_t index) const {
  auto& st = checked(state_);
  if (index >= model_->outputs().size())
    throw InvalidArgument("output index " + std::to_string(index) +
                          " out of range: the model has " +
                          std::to_string(model_->outputs().size()) + " outputs");
  auto lock = lock_idle(st, "get a tensor");
  return st.outputs[index];
}

namespace {

void mark_started(detail::RequestState& st, bool synchronous) {
  auto lock = lock_idle(st, "start it again");
  st.busy = true;
  st.callback_disabled = synchronous;
  st.error = nullptr;
  st.cancel_requested.store(false);
}

}  // namespace

void InferRequest::infer() {
  mark_started(checked(state_), /*synchronous=*/true);
  model_->pipeline().submit(state_, /*caller_waits=*/true);
  wait();
}

void InferRequest::start_async() {
  mark_started(checked(state_), /*synchronous=*/false);
  model_->pipeline().submit(state_);
}

void InferRequest::wait() {
  auto& st = checked(state_);
  std::unique_lock<std::mutex> lock(st.mutex);
  st.done_cv.wait(lock, [&] { return !st.busy && !st.callback_running; });
  if (st.error) std::rethrow_exception(st.error);
}

bool InferRequest::wait_for(std::chrono::milliseconds timeout) {
  auto& st = checked(state_);
  std::unique_lock<std::mutex> lock(st.mutex);
  if (!st.done_cv.wait_for(lock, timeout, [&] { return !st.busy && !st.callback_running; }))
    return false;
  if (st.error) std::rethrow_exception(st.error);
  return true;
}

void InferRequest::set_callback(std::function<void(std::exception_ptr)> callback) {
  auto& st = checked(state_);
  auto lock = lock_idle(st, "set its callback");
  st.callback = std::move(callback);
}

void InferRequest::cancel() {
  auto& st = checked(state_);
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    if (!st.busy) return;
    st.cancel_requested.store(true);
  }
  // A request waiting in the scheduler's queue (for a batch to fill, a credit, its priority)
  // completes now rather than when its batch would have left.
  model_->pipeline().cancel_waiting();
}

void InferRequest::set_priority(int64_t priority) {
  auto& st = checked(state_);
  auto lock = lock_idle(st, "change its priority");
  st.priority = priority;
}

void InferRequest::set_timeout(std::chrono::microseconds timeout) {
  auto& st = checked(state_);
  auto lock = lock_idle(st, "change its timeout");
  st.timeout_us = timeout.count();
}

std::vector<ProfilingInfo> InferRequest::profiling_info() const {
  auto& st = checked(state_);
  auto lock = lock_idle(st, "read its counters");
  std::vector<ProfilingInfo> out;
  const detail::RequestTrace& t = st.last_trace;
  if (st.completed_runs == 0) return out;
  for (size_t i = 0; i < detail::stage_count; ++i) {
    const detail::StageSpan& span = t.stages[i];
    ProfilingInfo p;
    p.name = stage_names[i];
    p.node_type = "Stage";
    p.exec_type = i == static_cast<size_t>(detail::Stage::execute)
                      ? execute_place(*model_, span.worker)
                      : "actor";
    if (span.end_ns != 0) {
      p.status = ProfilingInfo::Status::executed;
      p.real_time_us = (span.end_ns - span.start_ns) / 1000;
      p.cpu_time_us = span.cpu_ns / 1000;
      const int64_t ready = t.ready_ns(i);
      if (ready != 0) p.queue_us = std::max<int64_t>(0, span.start_ns - ready) / 1000;
      if (i == static_cast<size_t>(detail::Stage::execute)) p.batch_size = span.batch;
    }
    out.push_back(p);
  }
  if (!t.ops.empty()) {
    const auto& nodes = model_->graph()->model->nodes();
    const std::vector<std::string> implementations = model_->node_implementations();
    for (size_t n = 0; n < t.ops.size() && n < nodes.size(); ++n) {
      ProfilingInfo p;
      p.name = nodes[n].name;
      p.node_type = nodes[n].op_type;
      p.exec_type = n < implementations.size() ? implementations[n] : "ref";
      p.status = p.exec_type == "folded" ? ProfilingInfo::Status::optimized_out
                                         : ProfilingInfo::Status::executed;
      p.real_time_us = t.ops[n].real_ns / 1000;
      p.cpu_time_us = t.ops[n].cpu_ns / 1000;
      out.push_back(p);
    }
  }
  return out;
}

}  // namespace troupe
