// Execute: runs the graph for requests on this stream's executor. Spawned detached (its own
// thread): a graph run is long blocking compute that must not starve CAF's scheduler, and oneDNN's
// OpenMP team is per calling thread, so one thread per stream keeps the teams apart. A small
// model's graph run is as short as another stage's handler: then execute is a scheduled actor
// like them (CompileConfig::execute_on_scheduler, engine/graph/thread_policy.hpp), which saves two
// thread wake-ups per request. A request too large for that (a dynamic model given large shapes)
// runs on a detached helper instead, and the actor awaits it, so the stream's executor still runs
// one graph at a time and no worker is held for long.
//
// A batch of several requests (the scheduler's dynamic batching) runs as one graph run on their
// inputs concatenated along the leading dimension, and each request gets its share of the
// outputs; a merged run that fails reruns its requests alone, so only a faulty one fails.

#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <stdexcept>

#include "actors/caller_runs_unit.hpp"
#include "actors/stage.hpp"
#include "actors/tensor_checks.hpp"
#include "engine/graph/thread_policy.hpp"

namespace troupe::actors {

namespace {

/// helper -> execute on the scheduler: the large request it was given has gone on to download.
using ran_atom = caf::atom_constant<caf::atom("ran")>;

using ShapesKey = std::vector<std::vector<int64_t>>;  // input shapes, as a map key

struct ExecuteState {
  std::vector<Tensor> batch_inputs, batch_outputs;  // reused across batches
  // Per input shapes: the output shapes of one request run alone. A merged run must produce
  // exactly these, each with k times the leading dimension; shapes not seen alone yet run alone
  // first. Shapes whose merged run failed that check are never merged again.
  std::map<ShapesKey, std::vector<Shape>> alone_output_shapes;
  std::set<ShapesKey> unmergeable;
  caf::actor large_request_runner;  // execute on the scheduler: spawned on the first large request
};

ShapesKey key_of(const std::vector<Tensor>& tensors) {
  ShapesKey key;
  for (const Tensor& t : tensors) key.push_back(t.shape().dims());
  return key;
}

std::vector<Shape> shapes_of(const std::vector<Tensor>& tensors) {
  std::vector<Shape> shapes;
  for (const Tensor& t : tensors) shapes.push_back(t.shape());
  return shapes;
}

using ExecuteActor = caf::stateful_actor<ExecuteState>;

// The graph on the request's slot.
void run_graph(PipelineContext& ctx, int stream, request_msg& msg) {
  ExecuteSlot& slot = ctx.slots[static_cast<size_t>(msg.slot)];
  auto* timings = ctx.config.enable_profiling ? &msg.trace.ops : nullptr;
  ctx.executors[static_cast<size_t>(stream)]->run(slot.inputs, slot.outputs, timings);
}

// Without batching: the stage's checks, then the graph.
void run_one(PipelineContext& ctx, int stream, request_msg& msg) {
  run_stage(
      ctx, detail::Stage::execute, msg, [&] { run_graph(ctx, stream, msg); }, stream);
}

// With batching, once run_stage's checks have passed: the graph for this request alone, stamping
// its span, and noting the output shapes its input shapes give.
void run_alone(PipelineContext& ctx, int stream, ExecuteState& st, request_msg& msg) {
  timed_stage(detail::Stage::execute, msg, stream, ctx.config.enable_profiling, [&] {
    run_graph(ctx, stream, msg);
    const ExecuteSlot& slot = ctx.slots[static_cast<size_t>(msg.slot)];
    if (st.alone_output_shapes.size() >= 64) st.alone_output_shapes.clear();  // bounded
    st.alone_output_shapes[key_of(slot.inputs)] = shapes_of(slot.outputs);
  });
}

bool same_input_shapes(const ExecuteSlot& a, const ExecuteSlot& b) {
  if (a.inputs.size() != b.inputs.size()) return false;
  for (size_t i = 0; i < a.inputs.size(); ++i)
    if (a.inputs[i].shape() != b.inputs[i].shape() ||
        a.inputs[i].element_type() != b.inputs[i].element_type())
      return false;
  return true;
}

/// A merged run whose outputs are not the requests' outputs stacked along the leading dimension.
struct NotStackable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One run on the inputs of `group` (two or more requests whose inputs have the same shapes)
// concatenated along the leading dimension; each request's outputs are its share of the result.
// `alone`: the output shapes of one of them run alone. Throws NotStackable when the outputs are
// not those shapes stacked k times, anything else when the run fails.
void run_merged(PipelineContext& ctx, int stream, ExecuteState& st,
                std::vector<request_msg*>& group, const std::vector<Shape>& alone,
                std::vector<detail::OpTiming>* timings) {
  const size_t k = group.size();
  auto slot_of = [&](size_t j) -> ExecuteSlot& {
    return ctx.slots[static_cast<size_t>(group[j]->slot)];
  };
  const ExecuteSlot& first = slot_of(0);
  st.batch_inputs.resize(first.inputs.size());
  for (size_t i = 0; i < first.inputs.size(); ++i) {
    Shape merged = first.inputs[i].shape();
    merged[0] *= static_cast<int64_t>(k);
    ensure_buffer(st.batch_inputs[i], first.inputs[i].element_type(), merged);
    const size_t bytes = first.inputs[i].byte_size();
    auto* dst = static_cast<std::byte*>(st.batch_inputs[i].raw_data());
    for (size_t j = 0; j < k; ++j)
      std::memcpy(dst + j * bytes, slot_of(j).inputs[i].raw_data(), bytes);
  }
  ctx.executors[static_cast<size_t>(stream)]->run(st.batch_inputs, st.batch_outputs, timings);
  if (st.batch_outputs.size() != alone.size()) throw NotStackable("output count differs");
  for (size_t o = 0; o < st.batch_outputs.size(); ++o) {
    const Tensor& produced = st.batch_outputs[o];
    const Shape& share = alone[o];
    Shape stacked = share;
    if (stacked.rank() > 0) stacked[0] *= static_cast<int64_t>(k);
    if (share.rank() == 0 || produced.shape() != stacked || !produced.is_contiguous())
      throw NotStackable("output " + std::to_string(o) + " of shape " +
                         produced.shape().to_string() + " is not " + std::to_string(k) + " x " +
                         share.to_string());
  }
  for (size_t o = 0; o < st.batch_outputs.size(); ++o) {
    const Tensor& produced = st.batch_outputs[o];
    const Shape& share = alone[o];
    const size_t bytes = produced.byte_size() / k;
    const auto* src = static_cast<const std::byte*>(produced.raw_data());
    for (size_t j = 0; j < k; ++j) {
      ExecuteSlot& slot = slot_of(j);
      slot.outputs.resize(st.batch_outputs.size());
      ensure_buffer(slot.outputs[o], produced.element_type(), share);
      std::memcpy(slot.outputs[o].raw_data(), src + j * bytes, bytes);
    }
  }
}

// Runs the requests of a batch (the scheduler merged only requests whose inputs have equal shapes)
// as one run where it can.
void run_batch(PipelineContext& ctx, int stream, ExecuteState& st,
               std::vector<request_msg>& taken) {
  // Each request's own checks (cancellation, test hook) first; those that pass run together.
  std::vector<request_msg*> group;
  for (request_msg& msg : taken) {
    run_stage(
        ctx, detail::Stage::execute, msg, [] {}, stream);
    if (!msg.error) group.push_back(&msg);
  }
  if (group.empty()) return;
  // The scheduler groups by a hash of the input shapes; a collision must not reach run_merged,
  // which sizes every request's share by the first one's.
  const ExecuteSlot& lead = ctx.slots[static_cast<size_t>(group.front()->slot)];
  for (request_msg* msg : group)
    if (!same_input_shapes(lead, ctx.slots[static_cast<size_t>(msg->slot)])) {
      for (request_msg* m : group) run_alone(ctx, stream, st, *m);
      return;
    }
  const ShapesKey key = key_of(ctx.slots[static_cast<size_t>(group.front()->slot)].inputs);
  if (st.unmergeable.count(key)) {
    for (request_msg* msg : group) run_alone(ctx, stream, st, *msg);
    return;
  }
  auto alone = st.alone_output_shapes.find(key);
  if (alone == st.alone_output_shapes.end()) {  // the first of these shapes runs alone
    run_alone(ctx, stream, st, *group.front());
    group.erase(group.begin());
    alone = st.alone_output_shapes.find(key);
  }
  if (group.size() < 2 || alone == st.alone_output_shapes.end()) {
    for (request_msg* msg : group) run_alone(ctx, stream, st, *msg);
    return;
  }
  auto run_each_alone = [&] {
    ctx.batch_fallbacks.fetch_add(1, std::memory_order_relaxed);
    for (request_msg* msg : group) run_alone(ctx, stream, st, *msg);
  };
  const int64_t start = detail::now_ns();
  const bool measure_cpu = ctx.config.enable_profiling;
  const int64_t cpu0 = measure_cpu ? detail::thread_cpu_ns() : 0;
  std::vector<detail::OpTiming> timings;
  try {
    run_merged(ctx, stream, st, group, alone->second,
               ctx.config.enable_profiling ? &timings : nullptr);
  } catch (const NotStackable&) {
    // The model mixes requests along the leading dimension for these shapes: never again.
    st.unmergeable.insert(key);
    run_each_alone();
    return;
  } catch (...) {
    // One request's data can make a run fail: each runs alone, so only a faulty one fails.
    run_each_alone();
    return;
  }
  const int64_t end = detail::now_ns();
  const int64_t cpu = measure_cpu ? detail::thread_cpu_ns() - cpu0 : 0;
  for (request_msg* msg : group) {
    // Each request's span and op timings are those of the run it shared.
    detail::StageSpan& span = msg->trace.stages[static_cast<size_t>(detail::Stage::execute)];
    span = {start, end, cpu, stream, static_cast<int32_t>(group.size())};
    msg->trace.ops = timings;
  }
}

// Sends a batch that has run on to download. On a stream's own thread with no other request
// waiting for it, the thread then runs download, postprocess and the scheduler's turn for the
// credit they return itself (actors/caller_runs_unit.hpp), rather than waking a worker for them.
// `troupe bench -hint latency` on the ONNX MLP of benchmarks/models (Zen 4, 2 vCPUs): download's
// queue wait 8.6 -> 0.2 us, the median latency 49 -> 32-39 us (28-31 with the submitting
// thread's share, Pipeline::submit).
void send_to_download(caf::event_based_actor* self, const PipelineContext& ctx,
                      const StageHandles& next, batch_msg&& batch) {
  constexpr size_t turns = 3;  // download, postprocess, the scheduler
  if (ctx.config.execute_on_scheduler || !self->mailbox().empty()) {
    send_batch(self, next.download, stage_atom::value, std::move(batch));
    return;
  }
  send_and_run_here(self, turns,
                    [&] { send_batch(self, next.download, stage_atom::value, std::move(batch)); });
}

// run_batch, then every request goes on to download, also when something unexpected (an
// allocation failure) escaped: no request may stay behind in this actor.
void run_batch_and_send(caf::event_based_actor* self, PipelineContext& ctx,
                        const StageHandles& next, int stream, ExecuteState& st, batch_msg& batch) {
  const detail::ScopedOmpThreads threads(ctx.config.threads_per_stream);
  const detail::StreamExecutor& executor = *ctx.executors[static_cast<size_t>(stream)];
  const uint64_t built = executor.specializations_built();
  try {
    run_batch(ctx, stream, st, batch.requests);
  } catch (...) {
    const std::exception_ptr error = stage_error(detail::Stage::execute, std::current_exception());
    for (request_msg& msg : batch.requests)
      if (!msg.error) msg.error = error;
  }
  if (executor.specializations_built() != built)
    for (request_msg& msg : batch.requests)
      if (msg.credit.batch_size > 0) msg.credit.cold = true;
  send_to_download(self, ctx, next, std::move(batch));
}

// Runs one request without batching and sends it on, on the calling thread, with `threads`
// OpenMP threads (the stream's, or a large request's: CompileConfig::large_request_threads).
void run_and_send(caf::event_based_actor* self, PipelineContext& ctx, const StageHandles& next,
                  int stream, batch_msg& batch, int threads) {
  // Set on whichever thread runs the actor (a scheduler worker runs other stages too).
  const detail::ScopedOmpThreads omp_threads(threads);
  for (request_msg& msg : batch.requests) run_one(ctx, stream, msg);
  send_to_download(self, ctx, next, std::move(batch));
}

// A detached helper of execute on the scheduler: runs the requests too large for a worker.
caf::behavior large_request_runner(caf::event_based_actor* self, Context ctx, Handles next,
                                   int stream) {
  const int threads = ctx->config.large_request_threads > 0 ? ctx->config.large_request_threads
                                                            : ctx->config.threads_per_stream;
  return {[self, ctx, next, stream, threads](stage_atom, batch_msg& batch) {
    run_and_send(self, *ctx, *next, stream, batch, threads);
    return ran_atom::value;
  }};
}

int64_t input_elements(const PipelineContext& ctx, const batch_msg& batch) {
  int64_t n = 0;
  for (const request_msg& msg : batch.requests)
    for (const Tensor& t : ctx.slots[static_cast<size_t>(msg.slot)].inputs)
      n += static_cast<int64_t>(t.size());
  return n;
}

caf::behavior execute_stage(ExecuteActor* self, Context ctx, Handles next, int stream) {
  const bool batching = ctx->config.auto_batch_max_size > 1;
  return {
      [self, ctx, next, stream, batching](stage_atom, batch_msg& batch) {
        // The top priority level's own stream (after the others) runs while one of the others
        // gives way (engine/graph/stream_yield.hpp).
        const detail::TopRun top_run(stream == ctx->config.num_streams ? &ctx->stream_yield
                                                                       : nullptr);
        if (batching) {
          run_batch_and_send(self, *ctx, *next, stream, self->state, batch);
          return;
        }
        if (ctx->config.execute_on_scheduler &&
            input_elements(*ctx, batch) > ctx->config.scheduled_input_elements_limit) {
          ExecuteState& st = self->state;
          if (!st.large_request_runner)
            st.large_request_runner =
                self->spawn<caf::detached + caf::linked>(large_request_runner, ctx, next, stream);
          // await: the next batch waits in the mailbox until this one has run.
          self->request(st.large_request_runner, caf::infinite, stage_atom::value, std::move(batch))
              .await([](ran_atom) {},
                     [](const caf::error&) {
                       // only when the helper is gone, at shutdown: nothing is in flight then
                     });
          return;
        }
        run_and_send(self, *ctx, *next, stream, batch, ctx->config.threads_per_stream);
      },
  };
}

}  // namespace

caf::actor spawn_execute_stage(caf::actor_system& system, Context ctx, Handles next, int stream) {
  if (ctx->config.execute_on_scheduler)
    return system.spawn(execute_stage, std::move(ctx), std::move(next), stream);
  return system.spawn<caf::detached>(execute_stage, std::move(ctx), std::move(next), stream);
}

}  // namespace troupe::actors
