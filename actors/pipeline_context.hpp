#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/pipeline_stats.hpp"
#include "actors/remote_replicas.hpp"
#include "actors/request_state.hpp"
#include "engine/graph/compile_config.hpp"
#include "engine/graph/compiled_graph.hpp"
#include "engine/graph/stream_executor.hpp"
#include "engine/graph/stream_yield.hpp"
#include "troupe/pre_post_processor.hpp"

namespace troupe::actors {

/// The buffers of one execute slot: a request holds a slot from upload until download has copied
/// its outputs out. Each stream has several slots so that upload of the next request and download
/// of the previous one overlap with execution.
struct ExecuteSlot {
  int stream = 0;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
};

/// Counts requests between submission and the hand-over to the completion actor, so shutdown can
/// wait until nothing is left inside the stages.
class InFlight {
 public:
  void acquire() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--count_ == 0) cv_.notify_all();
  }
  void wait_idle() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return count_ == 0; });
  }
  int64_t count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  int64_t count_ = 0;
};

/// Test-only instrumentation: called at the start of each stage's work for each request. It may
/// sleep (to prove overlap) or throw (to prove failure isolation).
using StageHook = std::function<void(detail::Stage stage, uint64_t request_id)>;

/// What the stage actors of one compiled model share. Each field is either immutable after
/// construction or owned by exactly one actor (executors by their stream, slots by the stage that
/// holds the request assigned to them).
struct PipelineContext {
  std::string name;  // the model's name (NETWORK_NAME)
  std::shared_ptr<const detail::CompiledGraph> graph;
  detail::CompileConfig config;
  std::vector<ValueInfo> inputs;  // what the caller binds (after pre/postprocessing declarations)
  std::vector<ValueInfo> outputs;
  std::vector<ValueInfo> graph_inputs;  // what the graph takes / produces
  std::vector<ValueInfo> graph_outputs;
  // Layouts the execute streams take each graph input in and write each graph output in: upload
  // converts the caller's plain inputs into them, download converts the outputs back.
  std::vector<kernels::TensorLayout> graph_input_layouts;
  std::vector<kernels::TensorLayout> graph_output_layouts;
  std::shared_ptr<const PrePostProcessing> pre_post;               // null when none was declared
  std::vector<std::unique_ptr<detail::StreamExecutor>> executors;  // one per stream
  std::vector<ExecuteSlot> slots;
  detail::PipelineStats stats;
  // Merged runs (automatic batching) that failed and ran their requests alone. How many ran
  // merged is in the stats: each request's execute span says how many shared it.
  std::atomic<int64_t> batch_fallbacks{0};
  InFlight in_flight;
  StageHook hook;
  // With top_priority_stream: the other streams give way while that stream runs.
  detail::StreamYield stream_yield;
  std::atomic<uint64_t> next_request_id{1};
  // A remote-backed pipeline (Core::connect_remote): no graph, no executors, no slots; a router
  // stage sends each request to a replica in place of upload, execute and download.
  std::shared_ptr<RemoteReplicas> remote;

  PipelineContext(std::shared_ptr<const detail::CompiledGraph> g, detail::CompileConfig c)
      : graph(std::move(g)), config(c), stats(c.executor_streams()) {}
};

}  // namespace troupe::actors
