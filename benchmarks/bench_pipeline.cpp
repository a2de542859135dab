// The cost of the pipeline itself: a trivial model (one Relu over f32 [1,16]) so that the stage
// actors, their messages and the completion path are what is measured, not the kernels.
//
//   BM_SingleRequestLatency        one request, synchronous infer(), through all five stages
//   BM_RequestsInFlight/N          N requests kept in flight with start_async + callbacks;
//                                  items_per_second is the request rate
//
// Run: build/bin/troupe_benchmarks --benchmark_filter=Pipeline  (or
// benchmarks/run_pipeline_bench.sh)

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <vector>

#include <benchmark/benchmark.h>

#include "engine/runtime/compiled_model_impl.hpp"
#include "actors/pipeline_stats.hpp"
#include "troupe/core.hpp"
#include "troupe/model_builder.hpp"
#include "troupe/properties.hpp"

namespace {

std::shared_ptr<troupe::Model> make_trivial_model() {
  troupe::ModelBuilder b("trivial_relu");
  auto x = b.input("x", troupe::ElementType::f32, {1, 16});
  b.output(b.op("Relu", {x}, {}, "relu"), "y");
  return b.build();
}

troupe::Tensor make_input() {
  std::vector<float> v(16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) - 8.0f;
  return troupe::Tensor::from_vector<float>({1, 16}, v);
}

// Mean time per stage over the measured requests, as benchmark counters (microseconds).
void add_stage_counters(benchmark::State& state, const troupe::CompiledModel& compiled) {
  const auto summary = compiled.impl()->context().stats.summary();
  static const char* short_names[] = {"pre_us", "upload_us", "exec_us", "download_us", "post_us"};
  for (size_t i = 0; i < summary.stages.size(); ++i)
    state.counters[short_names[i]] = summary.stages[i].mean_us;
  state.counters["in_flight"] = summary.mean_in_flight;
}

void BM_PipelineSingleRequestLatency(benchmark::State& state) {
  troupe::Core core;
  // One compute thread: a 16-element Relu gains nothing from a thread team, and on a loaded
  // machine a team's barrier can wait a whole scheduler time slice for its second thread.
  auto compiled = core.compile_model(make_trivial_model(), "CPU",
                                     {{troupe::props::performance_mode, "LATENCY"},
                                      {troupe::props::inference_num_threads, state.range(0)}});
  auto request = compiled.create_infer_request();
  request.set_tensor("x", make_input());
  request.infer();  // warm-up: first-run allocations
  compiled.impl()->context().stats.reset();
  for (auto _ : state) request.infer();
  state.SetItemsProcessed(state.iterations());
  add_stage_counters(state, compiled);
}
BENCHMARK(BM_PipelineSingleRequestLatency)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Completions handed from troupe's callback actor to the benchmark thread, which restarts the
// request (a request cannot be restarted from inside its own callback).
class CompletionQueue {
 public:
  void push(size_t request, std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      items_.emplace_back(request, std::move(error));
    }
    cv_.notify_one();
  }
  std::pair<size_t, std::exception_ptr> pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !items_.empty(); });
    auto item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<size_t, std::exception_ptr>> items_;
};

void BM_PipelineRequestsInFlight(benchmark::State& state) {
  const int in_flight = static_cast<int>(state.range(0));
  troupe::Core core;
  auto compiled =
      core.compile_model(make_trivial_model(), "CPU",
                         {{troupe::props::performance_mode, "THROUGHPUT"},
                          {troupe::props::max_requests_in_flight, std::max(8, in_flight)}});
  CompletionQueue queue;
  std::vector<troupe::InferRequest> requests;
  for (int i = 0; i < in_flight; ++i) {
    auto r = compiled.create_infer_request();
    r.set_tensor("x", make_input());
    r.infer();  // warm-up
    const size_t index = requests.size();
    r.set_callback([&queue, index](std::exception_ptr e) { queue.push(index, std::move(e)); });
    requests.push_back(std::move(r));
  }
  compiled.impl()->context().stats.reset();

  for (auto& r : requests) r.start_async();
  for (auto _ : state) {
    auto [index, error] = queue.pop();
    if (error) {
      state.SkipWithError("a request failed");
      break;
    }
    requests[index].wait();  // returns once the callback has finished
    requests[index].start_async();
  }
  // The timer stopped with the loop; let the requests still in flight finish.
  for (auto& r : requests) {
    try {
      r.wait();
    } catch (...) {
    }
  }
  state.SetItemsProcessed(state.iterations());
  add_stage_counters(state, compiled);
}
BENCHMARK(BM_PipelineRequestsInFlight)
    ->ArgName("in_flight")
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
