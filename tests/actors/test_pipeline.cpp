// The stage pipeline under load: correctness of every request with many in flight from several
// threads, counters, busy/cancel/failure semantics, backpressure and proven stage overlap.

#include <gmock/gmock.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "actors/stage.hpp"
#include "kernels/omp_threads.hpp"
#include "pipeline_fixture.hpp"

using namespace troupe;
using namespace troupe::test;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

TEST(Pipeline, SyncInferAndStageCounters) {
  Core core;
  auto compiled = core.compile_model(make_add_relu_model());
  auto request = compiled.create_infer_request();
  Tensor in = make_input(0.f);
  request.set_tensor("x", in);
  request.infer();
  expect_add_relu_output(in, request.get_tensor("y"));
  auto info = request.profiling_info();
  ASSERT_EQ(info.size(), 5u);  // profiling off: stages only
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(info[i].name, stage_names[i]);
    EXPECT_EQ(info[i].status, ProfilingInfo::Status::executed);
    EXPECT_EQ(info[i].node_type, "Stage");
    EXPECT_GE(info[i].real_time_us, 0);
  }
}

TEST(Pipeline, PerNodeCountersWhenProfiling) {
  Core core;
  auto compiled =
      core.compile_model(make_add_relu_model(), "CPU", {{props::enable_profiling, true}});
  auto request = compiled.create_infer_request();
  request.set_input_tensor(0, make_input(1.f));
  request.infer();
  auto info = request.profiling_info();
  ASSERT_EQ(info.size(), 7u);
  EXPECT_EQ(info[5].name, "add");
  EXPECT_EQ(info[5].node_type, "Add");
  EXPECT_EQ(info[6].name, "relu");
  EXPECT_FALSE(info[6].exec_type.empty());
}

TEST(Pipeline, HundredsOfRequestsFromSeveralThreadsEachCompleteOnceCorrectly) {
  Core core;
  for (const char* hint : {"LATENCY", "THROUGHPUT"}) {
    auto compiled = core.compile_model(make_add_relu_model(), "CPU",
                                       {{props::performance_mode, hint}, {props::num_streams, 2}});
    constexpr int threads = 4, per_thread = 16, rounds = 5;  // 320 runs
    std::atomic<int> callbacks{0}, failures{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        std::vector<InferRequest> requests;
        std::vector<Tensor> inputs;
        std::vector<std::atomic<int>> counts(per_thread);
        for (int i = 0; i < per_thread; ++i) {
          requests.push_back(compiled.create_infer_request());
          inputs.push_back(make_input(static_cast<float>(t * 1000 + i)));
          requests[i].set_tensor("x", inputs[i]);
          requests[i].set_callback([&, i](std::exception_ptr e) {
            if (e) ++failures;
            ++counts[i];
            ++callbacks;
          });
        }
        for (int r = 0; r < rounds; ++r) {
          for (auto& req : requests) req.start_async();
          for (int i = 0; i < per_thread; ++i) {
            requests[i].wait();
            expect_add_relu_output(inputs[i], requests[i].get_tensor("y"));
            EXPECT_EQ(counts[i].load(), r + 1);  // the callback ran exactly once per run
          }
        }
      });
    }
    for (auto& w : workers) w.join();
    EXPECT_EQ(callbacks.load(), threads * per_thread * rounds);
    EXPECT_EQ(failures.load(), 0);
  }
}

namespace {

// Runs n requests through a pipeline whose preprocess and execute stages each sleep `delay`;
// returns the wall time in ms and leaves the traces in the compiled model's stats.
double run_delayed(CompiledModel& compiled, int n, std::chrono::milliseconds delay) {
  set_stage_hook(compiled, [delay](detail::Stage stage, uint64_t) {
    if (stage == detail::Stage::preprocess || stage == detail::Stage::execute)
      std::this_thread::sleep_for(delay);
  });
  std::vector<InferRequest> requests;
  for (int i = 0; i < n; ++i) {
    requests.push_back(compiled.create_infer_request());
    requests.back().set_tensor("x", make_input(static_cast<float>(i)));
  }
  const auto start = Clock::now();
  for (auto& r : requests) r.start_async();
  for (auto& r : requests) r.wait();
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

TEST(Pipeline, StagesOverlapAcrossRequests) {
  // With 50 ms in preprocess and 50 ms in execute, N requests take about (N + 1) x 50 ms when the
  // stages overlap, and N x 100 ms when one request at a time is let in (credits = 1). Both runs
  // happen here, back to back, so a loaded machine slows both alike.
  constexpr int n = 12;
  const auto delay = std::chrono::milliseconds(50);
  Core core;
  auto serial =
      core.compile_model(make_add_relu_model(), "CPU", {{props::max_requests_in_flight, 1}});
  const double serial_ms = run_delayed(serial, n, delay);
  auto pipelined =
      core.compile_model(make_add_relu_model(), "CPU", {{props::max_requests_in_flight, 32}});
  const double pipelined_ms = run_delayed(pipelined, n, delay);
  EXPECT_GE(serial_ms, n * 100.0 * 0.95);
  EXPECT_GE(pipelined_ms, n * 50.0 * 0.95);
  EXPECT_LT(pipelined_ms, 0.8 * serial_ms)
      << "stages did not overlap: " << pipelined_ms << " ms vs " << serial_ms
      << " ms serial (ideal " << (n + 1) * 50 << " ms)";
  // The stamps show it directly: requests' preprocess ran while other requests executed.
  auto traces = pipelined.impl()->context().stats.traces();
  ASSERT_EQ(traces.size(), static_cast<size_t>(n));
  int overlapping = 0;
  for (const auto& a : traces)
    for (const auto& b : traces) {
      const auto& pre = a.stages[0];
      const auto& exe = b.stages[2];
      if (&a != &b && pre.start_ns < exe.end_ns && exe.start_ns < pre.end_ns) ++overlapping;
    }
  EXPECT_GE(overlapping, n / 2);
  auto summary = pipelined.impl()->context().stats.summary();
  EXPECT_GT(summary.mean_in_flight, 2.0);
  EXPECT_GT(summary.stage_overlap, 1.3);  // more than one stage busy at a time on average
  EXPECT_LT(serial.impl()->context().stats.summary().stage_overlap, 1.1);
}

TEST(Pipeline, BusyWhileInFlightAndWaitForTimesOut) {
  Core core;
  auto compiled = core.compile_model(make_add_relu_model());
  std::atomic<bool> release{false};
  set_stage_hook(compiled, [&](detail::Stage stage, uint64_t) {
    if (stage == detail::Stage::execute)
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  auto request = compiled.create_infer_request();
  request.set_tensor("x", make_input(0.f));
  request.start_async();
  EXPECT_FALSE(request.wait_for(std::chrono::milliseconds(20)));
  EXPECT_THROW(request.set_tensor("x", make_input(1.f)), Busy);
  EXPECT_THROW(request.get_tensor("y"), Busy);
  EXPECT_THROW(request.profiling_info(), Busy);
  EXPECT_THROW(request.start_async(), Busy);
  EXPECT_THROW(request.set_callback([](std::exception_ptr) {}), Busy);
  release = true;
  EXPECT_TRUE(request.wait_for(std::chrono::seconds(10)));
  EXPECT_NO_THROW(request.get_tensor("y"));
}

TEST(Pipeline, CancelParkedAndRunningRequests) {
  Core core;
  // One credit: one request in the stages, the rest parked at admission.
  auto compiled =
      core.compile_model(make_add_relu_model(), "CPU", {{props::max_requests_in_flight, 1}});
  std::atomic<bool> release{false};
  set_stage_hook(compiled, [&](detail::Stage stage, uint64_t) {
    if (stage == detail::Stage::preprocess)
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  constexpr int n = 20;
  std::vector<InferRequest> requests;
  std::atomic<int> callbacks{0};
  for (int i = 0; i < n; ++i) {
    requests.push_back(compiled.create_infer_request());
    requests.back().set_tensor("x", make_input(static_cast<float>(i)));
    requests.back().set_callback([&](std::exception_ptr) { ++callbacks; });
    requests.back().start_async();
  }
  for (int i = 0; i < n; i += 2) requests[i].cancel();  // request 0 is inside preprocess
  release = true;
  for (int i = 0; i < n; ++i) {
    if (i % 2 == 0) {
      EXPECT_THROW(requests[i].wait(), Cancelled) << i;
    } else {
      EXPECT_NO_THROW(requests[i].wait()) << i;
    }
  }
  EXPECT_EQ(callbacks.load(), n);
  // A cancelled request runs normally when started again.
  requests[0].infer();
  // Cancel of an idle request is a no-op.
  requests[1].cancel();
  EXPECT_NO_THROW(requests[1].infer());
}

TEST(Pipeline, AStageExceptionFailsOnlyThatRequest) {
  Core core;
  auto compiled = core.compile_model(make_add_relu_model(), "CPU", {{props::num_streams, 2}});
  std::mutex mutex;
  std::set<uint64_t> failed_ids;
  set_stage_hook(compiled, [&](detail::Stage stage, uint64_t id) {
    const detail::Stage target = static_cast<detail::Stage>(id % detail::stage_count);
    if (id % 3 == 0 && stage == target) {
      std::lock_guard<std::mutex> lock(mutex);
      failed_ids.insert(id);
      throw std::runtime_error("injected failure in stage " +
                               std::to_string(static_cast<int>(stage)));
    }
  });
  constexpr int n = 90;
  std::vector<InferRequest> requests;
  std::vector<Tensor> inputs;
  for (int i = 0; i < n; ++i) {
    requests.push_back(compiled.create_infer_request());
    inputs.push_back(make_input(static_cast<float>(i)));
    requests.back().set_tensor("x", inputs.back());
    requests.back().start_async();
  }
  int failed = 0;
  for (int i = 0; i < n; ++i) {
    try {
      requests[i].wait();
      expect_add_relu_output(inputs[i], requests[i].get_tensor("y"));
    } catch (const ExecutionError& e) {  // typed, naming the stage the exception escaped
      EXPECT_THAT(e.what(), HasSubstr(" stage: injected failure"));
      ++failed;
    }
  }
  EXPECT_EQ(static_cast<size_t>(failed), failed_ids.size());
  EXPECT_GE(failed, 25);
  // Every stage failed at least once, and the pipeline still works.
  set_stage_hook(compiled, nullptr);
  for (auto& r : requests) r.start_async();
  for (int i = 0; i < n; ++i) {
    requests[i].wait();
    expect_add_relu_output(inputs[i], requests[i].get_tensor("y"));
  }
}

TEST(Pipeline, ThrowingCallbackHarmsNothing) {
  Core core;
  auto compiled = core.compile_model(make_add_relu_model());
  std::vector<InferRequest> requests;
  std::atomic<int> calls{0};
  for (int i = 0; i < 32; ++i) {
    requests.push_back(compiled.create_infer_request());
    requests.back().set_tensor("x", make_input(static_cast<float>(i)));
    requests.back().set_callback([&](std::exception_ptr) {
      ++calls;
      throw std::runtime_error("callback bug");
    });
  }
  for (int round = 0; round < 3; ++round) {
    for (auto& r : requests) r.start_async();
    for (auto& r : requests) EXPECT_NO_THROW(r.wait());
  }
  EXPECT_EQ(calls.load(), 96);
}

TEST(Pipeline, BackpressureBoundsRequestsInsideTheStages) {
  Core core;
  auto compiled = core.compile_model(make_add_relu_model(), "CPU",
                                     {{props::max_requests_in_flight, 3}, {props::num_streams, 2}});
  std::mutex mutex;
  std::condition_variable entered;
  std::set<uint64_t> inside;
  size_t max_inside = 0;
  bool held_one = false;
  set_stage_hook(compiled, [&](detail::Stage stage, uint64_t id) {
    std::unique_lock<std::mutex> lock(mutex);
    if (stage == detail::Stage::preprocess) inside.insert(id);
    max_inside = std::max(max_inside, inside.size());
    entered.notify_all();
    if (stage != detail::Stage::postprocess) return;
    // The first request to leave waits (bounded) for another to come in, so that the credits
    // are used however fast a loaded machine runs each request alone.
    if (!held_one) {
      held_one = true;
      entered.wait_for(lock, std::chrono::seconds(10), [&] { return inside.size() >= 2; });
    }
    inside.erase(id);
  });
  std::vector<InferRequest> requests;
  for (int i = 0; i < 64; ++i) {
    requests.push_back(compiled.create_infer_request());
    requests.back().set_tensor("x", make_input(static_cast<float>(i)));
    requests.back().start_async();
  }
  for (auto& r : requests) r.wait();
  EXPECT_LE(max_inside, 3u);
  EXPECT_GE(max_inside, 2u);  // and the credits were actually used
}

TEST(Pipeline, InputAndOutputConversionAndStridedRegions) {
  Core core;
  auto compiled = core.compile_model(make_add_relu_model(1, 4));
  auto request = compiled.create_infer_request();
  // f64 input, converted by preprocess.
  request.set_tensor("x", Tensor::from_vector<double>({1, 4}, {-1.0, 0.0, 1.0, 2.0}));
  // f16 output, converted by postprocess.
  Tensor out16(ElementType::f16, {1, 4});
  request.set_tensor("y", out16);
  request.infer();
  EXPECT_EQ(out16.value_at(0), 0.0);
  EXPECT_EQ(out16.value_at(3), 2.5);
  // A strided region of a larger caller buffer: column 1 of a 4x3 matrix, viewed as [1,4].
  std::vector<float> big = {0, -2, 0, 0, 3, 0, 0, 4, 0, 0, 5, 0};
  request.set_tensor("x", Tensor(ElementType::f32, {1, 4}, &big[1], {0, 12}));
  // A strided output: every other element of a caller buffer.
  std::vector<float> out_buf(8, -7.f);
  Tensor strided_out(ElementType::f32, {1, 4}, out_buf.data(), {32, 8});
  request.set_tensor("y", strided_out);
  request.infer();
  EXPECT_EQ(out_buf, (std::vector<float>{0, -7, 3.5, -7, 4.5, -7, 5.5, -7}));
}

TEST(Pipeline, WrongTensorsAreRejectedWithNames) {
  Core core;
  auto compiled = core.compile_model(make_add_relu_model(1, 4));
  auto request = compiled.create_infer_request();
  std::string msg = error_of<TensorMismatch>([&] {
    request.set_tensor("x", Tensor(ElementType::f32, {1, 5}));
  });
  EXPECT_THAT(msg, HasSubstr("'x'"));
  EXPECT_THAT(msg, HasSubstr("[1,5]"));
  msg = error_of<TensorMismatch>([&] {
    request.set_tensor("x", Tensor(ElementType::boolean, {1, 4}));
  });
  EXPECT_THAT(msg, HasSubstr("boolean"));
  msg = error_of<TensorMismatch>([&] {
    request.set_tensor("y", Tensor(ElementType::i32, {1, 4}));
  });
  EXPECT_THAT(msg, HasSubstr("'y'"));
  msg = error_of<InvalidArgument>([&] {
    request.set_tensor("z", Tensor(ElementType::f32, {1, 4}));
  });
  EXPECT_THAT(msg, HasSubstr("'z'"));
  EXPECT_THROW(request.set_input_tensor(3, Tensor(ElementType::f32, {1, 4})), InvalidArgument);
  EXPECT_THROW(request.get_output_tensor(1), InvalidArgument);
  EXPECT_THROW(request.set_tensor("x", Tensor()), TensorMismatch);
  // Nothing was bound by the failed calls: the request still runs.
  EXPECT_NO_THROW(request.infer());
  EXPECT_THROW(InferRequest().infer(), InvalidArgument);
}

TEST(Pipeline, DynamicBatchRunsWithAnyBatch) {
  Core core;
  auto compiled = core.compile_model(make_add_relu_model(-1, 8), "CPU", {{props::num_streams, 2}});
  EXPECT_EQ(compiled.inputs()[0].shape.to_string(), "[?,8]");
  auto request = compiled.create_infer_request();
  // Shapes seen before come back from the executors' specializations, also after more distinct
  // shapes than they keep (8) have pushed the oldest out.
  std::vector<int64_t> batches = {3, 1, 5, 3};
  for (int64_t b = 1; b <= 12; ++b) batches.push_back(b);
  for (int64_t b = 12; b >= 1; --b) batches.push_back(b);
  for (int64_t batch : batches) {
    Tensor in = make_input(1.f, 8, batch);
    request.set_tensor("x", in);
    request.infer();
    Tensor out = request.get_tensor("y");
    EXPECT_EQ(out.shape(), (Shape{batch, 8}));
    expect_add_relu_output(in, out);
  }
}

TEST(Pipeline, CallbackMayReadOutputsAndRestartItsRequest) {
  Core core;
  auto compiled = core.compile_model(make_add_relu_model(), "CPU", {{props::num_streams, 2}});
  constexpr int rounds = 50;
  std::vector<InferRequest> requests(4);
  std::vector<int> runs(requests.size(), 0);
  std::atomic<int> bad{0};
  std::mutex mutex;
  std::condition_variable all_done;
  int finished = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i] = compiled.create_infer_request();
    Tensor in = make_input(static_cast<float>(i));
    requests[i].set_tensor("x", in);
    requests[i].set_callback([&, i, in](std::exception_ptr e) {
      if (e) ++bad;
      auto y = requests[i].get_tensor("y").to_vector<float>();  // allowed in the callback
      if (y[10] != expected_add_relu(in.to_vector<float>()[10])) ++bad;
      if (++runs[i] < rounds) {
        requests[i].start_async();  // the benchmark_app pattern
      } else {
        std::lock_guard<std::mutex> lock(mutex);
        ++finished;
        all_done.notify_all();
      }
    });
    requests[i].start_async();
  }
  std::unique_lock<std::mutex> lock(mutex);
  ASSERT_TRUE(all_done.wait_for(lock, std::chrono::seconds(60),
                                [&] { return finished == static_cast<int>(requests.size()); }));
  lock.unlock();
  for (auto& r : requests) r.wait();
  EXPECT_EQ(bad.load(), 0);
  for (int n : runs) EXPECT_EQ(n, rounds);
}

// Where execute runs: a small model's execute stages are scheduled actors, run by the same
// workers as the other stages; a large model's have a thread per stream, which no other stream's
// runs use (it may run the stages after execute itself when nothing waits for it:
// actors/caller_runs_unit.hpp). Either way every request of many in flight on two streams gets
// its own result.
TEST(Pipeline, SmallModelsExecuteOnTheSchedulersWorkersLargeOnesOnTheirOwnThreads) {
  for (const int64_t width : {int64_t{16}, int64_t{2'000'000}}) {
    SCOPED_TRACE("width " + std::to_string(width));
    Core core;
    auto compiled = core.compile_model(
        make_add_relu_model(1, width), "CPU",
        {{props::num_streams, int64_t{2}}, {props::inference_num_threads, int64_t{2}}});
    const bool small = width == 16;
    EXPECT_EQ(compiled.impl()->config().execute_on_scheduler, small);
    std::mutex mutex;
    std::set<std::thread::id> execute_threads, other_threads;
    set_stage_hook(compiled, [&](detail::Stage stage, uint64_t) {
      const std::lock_guard<std::mutex> lock(mutex);
      (stage == detail::Stage::execute ? execute_threads : other_threads)
          .insert(std::this_thread::get_id());
    });
    const int n = small ? 300 : 12;
    std::vector<InferRequest> requests;
    std::vector<Tensor> inputs;
    for (int i = 0; i < n; ++i) {
      requests.push_back(compiled.create_infer_request());
      inputs.push_back(make_input(static_cast<float>(i % 7), width));
      requests.back().set_tensor("x", inputs.back());
      requests.back().start_async();
    }
    for (int i = 0; i < n; ++i) {
      requests[i].wait();
      expect_add_relu_output(inputs[i], requests[i].get_tensor("y"));
    }
    size_t shared = 0;
    for (const auto& id : execute_threads) shared += other_threads.count(id);
    if (small) {
      EXPECT_GT(shared, 0u);  // a worker ran execute and other stages
    } else {
      EXPECT_EQ(execute_threads.size(), 2u);  // one per stream
    }
  }
}

// `rounds` synchronous infers of add_relu inputs of `width`, one after the other, each checked.
void infer_in_turn(InferRequest& request, int rounds, int64_t width) {
  for (int i = 0; i < rounds; ++i) {
    const Tensor input = make_input(static_cast<float>(i), width);
    request.set_tensor("x", input);
    request.infer();
    expect_add_relu_output(input, request.get_tensor("y"));
  }
}

// Which thread ran each stage of each request (the stage hook, installed until destroyed).
struct StageThreads {
  explicit StageThreads(CompiledModel& model) : compiled(model) {
    set_stage_hook(compiled, [this](detail::Stage stage, uint64_t) {
      const std::lock_guard<std::mutex> lock(mutex);
      threads[stage].push_back(std::this_thread::get_id());
    });
  }
  ~StageThreads() { set_stage_hook(compiled, nullptr); }
  StageThreads(const StageThreads&) = delete;
  StageThreads& operator=(const StageThreads&) = delete;

  CompiledModel& compiled;
  std::mutex mutex;
  std::map<detail::Stage, std::vector<std::thread::id>> threads;
};

// Who runs the stages of a request alone in the pipeline (actors/caller_runs_unit.hpp): a
// synchronous infer's own thread runs preprocess and upload; start_async never does, so it
// returns however long preprocessing takes; the stream's thread runs download and postprocess
// after execute; a closed loop restarting from its callback runs. Every result is the request's
// own.
TEST(Pipeline, ARequestAloneInThePipelineSkipsTheWakeUpsOfIdleWorkers) {
  Core core;
  // Wide enough that execute has a thread of its own.
  const int64_t width = 2'000'000;
  auto compiled =
      core.compile_model(make_add_relu_model(1, width), "CPU", {{props::num_streams, int64_t{1}}});
  ASSERT_FALSE(compiled.impl()->config().execute_on_scheduler);
  StageThreads recorded(compiled);
  auto& mutex = recorded.mutex;
  auto& threads = recorded.threads;
  auto request = compiled.create_infer_request();
  const int rounds = 5;
  infer_in_turn(request, rounds, width);
  {
    const std::lock_guard<std::mutex> lock(mutex);
    // The first infer finds the pipeline empty. Later ones usually do too, but the request
    // before is counted out just after its waiter is woken, which a busy machine may run first.
    EXPECT_EQ(threads[detail::Stage::preprocess].at(0), std::this_thread::get_id());
    EXPECT_EQ(threads[detail::Stage::upload].at(0), std::this_thread::get_id());
    for (int i = 0; i < rounds; ++i) {
      EXPECT_EQ(threads[detail::Stage::download][i], threads[detail::Stage::execute][i]);
      EXPECT_EQ(threads[detail::Stage::postprocess][i], threads[detail::Stage::execute][i]);
    }
    threads.clear();
  }

  const Tensor input = make_input(3.f, width);
  request.set_tensor("x", input);
  request.start_async();
  request.wait();
  expect_add_relu_output(input, request.get_tensor("y"));
  {
    const std::lock_guard<std::mutex> lock(mutex);
    EXPECT_NE(threads[detail::Stage::preprocess].at(0), std::this_thread::get_id());
    threads.clear();
  }

  // A closed loop restarting from its callback.
  std::mutex loop_mutex;
  std::condition_variable loop_done;
  int runs = 0, bad = 0;
  request.set_callback([&](std::exception_ptr e) {
    const std::lock_guard<std::mutex> lock(loop_mutex);
    if (e) ++bad;
    if (++runs < 50)
      request.start_async();
    else
      loop_done.notify_all();
  });
  request.start_async();
  {
    std::unique_lock<std::mutex> lock(loop_mutex);
    ASSERT_TRUE(loop_done.wait_for(lock, std::chrono::seconds(60), [&] { return runs == 50; }));
  }
  request.wait();
  request.set_callback(nullptr);
  expect_add_relu_output(input, request.get_tensor("y"));
  EXPECT_EQ(bad, 0);
  set_stage_hook(compiled, nullptr);
  // Which thread ran each restart's preprocess is not asserted: postprocess counts its request
  // out just after handing it to the callback, and on a busy machine the woken callback can
  // start the next request first (the pipeline is then not empty, and a worker runs it).
  const std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(threads[detail::Stage::preprocess].size(), 50u);
}

// As in OpenVINO, the callback is for runs started by start_async: a synchronous infer() returns
// its result to its caller and runs no callback.
TEST(Pipeline, ASynchronousInferDoesNotCallTheCallback) {
  Core core;
  auto compiled = core.compile_model(make_add_relu_model());
  auto request = compiled.create_infer_request();
  std::atomic<int> calls{0};
  request.set_callback([&](std::exception_ptr) { ++calls; });
  for (int i = 0; i < 3; ++i) {
    const Tensor input = make_input(static_cast<float>(i));
    request.set_tensor("x", input);
    request.infer();
    expect_add_relu_output(input, request.get_tensor("y"));
  }
  EXPECT_EQ(calls.load(), 0);
  request.start_async();
  request.wait();
  EXPECT_EQ(calls.load(), 1);
  request.infer();
  EXPECT_EQ(calls.load(), 1);
}

// CALLBACK_THREAD=STAGE: callbacks run on the stage that finished the request, not the
// completion thread; with many requests in flight from several threads, each restarting itself
// from its callback, every run completes once with its own result, and the model can be destroyed
// from such a callback.
TEST(Pipeline, CallbacksOnTheStageRunOnceEachAndMayRestartTheirRequest) {
  for (const int64_t width : {int64_t{16}, int64_t{2'000'000}}) {  // execute on workers, on its own
    Core core;
    auto compiled = core.compile_model(
        make_add_relu_model(1, width), "CPU",
        {{props::callback_thread, "STAGE"}, {props::performance_mode, "THROUGHPUT"}});
    const int requests_count = 8, runs_each = 40;
    std::vector<InferRequest> requests;
    std::vector<Tensor> inputs;
    std::mutex mutex;
    std::condition_variable done;
    int finished = 0, wrong = 0, errors = 0;
    int on_completion_thread = 0;
    std::vector<int> runs(requests_count, 0);
    for (int i = 0; i < requests_count; ++i) {
      requests.push_back(compiled.create_infer_request());
      inputs.push_back(make_input(static_cast<float>(i) - 3.f, width));
      requests.back().set_tensor("x", inputs.back());
    }
    for (int i = 0; i < requests_count; ++i) {
      requests[i].set_callback([&, i](std::exception_ptr e) {
        const Tensor y = requests[i].get_tensor("y");
        const bool right = y.data<float>()[0] == expected_add_relu(inputs[i].data<float>()[0]);
        bool again = false;
        {
          const std::lock_guard<std::mutex> lock(mutex);
          on_completion_thread += actors::on_callback_thread();
          errors += e != nullptr;
          wrong += !right;
          again = ++runs[i] < runs_each;
          if (!again && ++finished == requests_count) done.notify_all();
        }
        if (again) requests[i].start_async();
      });
    }
    std::vector<std::thread> starters;
    for (int t = 0; t < 2; ++t)
      starters.emplace_back([&, t] {
        for (int i = t; i < requests_count; i += 2) requests[i].start_async();
      });
    for (auto& s : starters) s.join();
    {
      std::unique_lock<std::mutex> lock(mutex);
      ASSERT_TRUE(done.wait_for(lock, std::chrono::seconds(60),
                                [&] { return finished == requests_count; }));
    }
    for (auto& r : requests) r.wait();
    EXPECT_EQ(errors, 0) << width;
    EXPECT_EQ(wrong, 0) << width;
    for (int i = 0; i < requests_count; ++i) EXPECT_EQ(runs[i], runs_each) << width;
    EXPECT_EQ(on_completion_thread, 0) << width;
    for (auto& r : requests) r.set_callback(nullptr);
  }
  // Destroyed from a callback on a stage: the drain leaves that stage to finish its request.
  Core core;
  auto owned = std::make_unique<CompiledModel>(
      core.compile_model(make_add_relu_model(), "CPU", {{props::callback_thread, "STAGE"}}));
  auto request = std::make_unique<InferRequest>(owned->create_infer_request());
  request->set_tensor("x", make_input(1.f));
  std::promise<void> destroyed;
  request->set_callback([&](std::exception_ptr) {
    owned.reset();
    destroyed.set_value();
  });
  request->start_async();
  ASSERT_EQ(destroyed.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  request->wait();
  request.reset();
}

// Where execute runs on the scheduler's workers (a small model), a synchronous caller alone in the
// pipeline takes its request through all five stages itself: no thread is woken for it.
TEST(Pipeline, ASmallModelsRequestAloneRunsTheWholeWayOnTheCallersThread) {
  Core core;
  auto compiled = core.compile_model(
      make_add_relu_model(1, 16), "CPU",
      {{props::num_streams, int64_t{1}}, {props::inference_num_threads, int64_t{1}}});
  ASSERT_TRUE(compiled.impl()->config().execute_on_scheduler);
  StageThreads recorded(compiled);
  auto& mutex = recorded.mutex;
  auto& threads = recorded.threads;
  auto request = compiled.create_infer_request();
  // 200 rounds of a tiny model (milliseconds): 20 all went through a worker once, with the suite
  // running beside it on two cores.
  const int rounds = 200;
  infer_in_turn(request, rounds, 16);
  set_stage_hook(compiled, nullptr);
  // Not every round: an actor a worker still holds (the pipeline's start-up messages, on a busy
  // machine) runs there, and the stages after it with it. Without the whole way on the caller,
  // execute never runs on the thread of a synchronous infer.
  const std::lock_guard<std::mutex> lock(mutex);
  const std::vector<detail::Stage> stages = {detail::Stage::preprocess, detail::Stage::upload,
                                             detail::Stage::execute, detail::Stage::download,
                                             detail::Stage::postprocess};
  for (detail::Stage stage : stages) ASSERT_EQ(threads[stage].size(), static_cast<size_t>(rounds));
  int whole_way_here = 0;
  for (int i = 0; i < rounds; ++i) {
    bool here = true;
    for (detail::Stage stage : stages) here &= threads[stage][i] == std::this_thread::get_id();
    whole_way_here += here;
  }
  EXPECT_GT(whole_way_here, 0);
}

// A dynamic model small at its smallest shapes executes on the scheduler, but a request given
// shapes too large for a worker runs on a thread of its own that runs nothing else, one per
// stream; small and large requests in flight together each get their own result.
TEST(Pipeline, LargeRequestsOfASmallDynamicModelRunOffTheScheduler) {
  Core core;
  auto compiled = core.compile_model(
      make_add_relu_model(-1, 16), "CPU",
      {{props::num_streams, int64_t{2}}, {props::inference_num_threads, int64_t{2}}});
  const auto& config = compiled.impl()->config();
  ASSERT_TRUE(config.execute_on_scheduler);
  const int64_t large_batch = config.scheduled_input_elements_limit / 16 + 1;
  std::mutex mutex;
  std::set<std::thread::id> other_threads, large_threads, small_threads;
  auto run = [&](const std::vector<int64_t>& batches) {
    std::vector<InferRequest> requests;
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < batches.size(); ++i) {
      requests.push_back(compiled.create_infer_request());
      inputs.push_back(make_input(static_cast<float>(i % 5), 16, batches[i]));
      requests.back().set_tensor("x", inputs.back());
      requests.back().start_async();
    }
    for (size_t i = 0; i < batches.size(); ++i) {
      requests[i].wait();
      expect_add_relu_output(inputs[i], requests[i].get_tensor("y"));
    }
  };
  // Which threads run execute for each size, and which run the other stages.
  set_stage_hook(compiled, [&](detail::Stage stage, uint64_t) {
    const std::lock_guard<std::mutex> lock(mutex);
    (stage == detail::Stage::execute ? large_threads : other_threads)
        .insert(std::this_thread::get_id());
  });
  run(std::vector<int64_t>(8, large_batch));
  set_stage_hook(compiled, [&](detail::Stage stage, uint64_t) {
    const std::lock_guard<std::mutex> lock(mutex);
    (stage == detail::Stage::execute ? small_threads : other_threads)
        .insert(std::this_thread::get_id());
  });
  run(std::vector<int64_t>(200, 1));
  set_stage_hook(compiled, nullptr);
  for (const auto& id : large_threads) EXPECT_EQ(other_threads.count(id), 0u);
  EXPECT_LE(large_threads.size(), 2u);  // a helper per stream at most
  size_t shared = 0;
  for (const auto& id : small_threads) shared += other_threads.count(id);
  EXPECT_GT(shared, 0u);
  // Mixed in flight.
  std::vector<int64_t> mixed;
  for (int i = 0; i < 40; ++i) mixed.push_back(i % 4 == 0 ? large_batch : 1 + i % 3);
  run(mixed);
}

// Under the latency hint such a model runs its small requests on one thread (on the thread that
// submits them when the pipeline is idle) and its large ones on a thread of their own with all the
// stream's threads; many of both in flight each get their own result.
TEST(Pipeline, ADynamicModelRunsLargeRequestsWithTheThreadsSmallOnesDoNotNeed) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (cores < 2) GTEST_SKIP() << "one core: one thread for every request";
  Core core;
  auto compiled = core.compile_model(make_add_relu_model(-1, 16), "CPU",
                                     {{props::performance_mode, "LATENCY"}});
  const auto& config = compiled.impl()->config();
  ASSERT_TRUE(config.execute_on_scheduler);
  EXPECT_EQ(config.threads_per_stream, 1);
  EXPECT_EQ(config.large_request_threads, cores);
  const int64_t large_batch = config.scheduled_input_elements_limit / 16 + 1;
  std::mutex mutex;
  std::map<int, int> runs_by_threads;  // executions per OpenMP thread count they ran with
  set_stage_hook(compiled, [&](detail::Stage stage, uint64_t) {
    if (stage != detail::Stage::execute) return;
    const std::lock_guard<std::mutex> lock(mutex);
    ++runs_by_threads[detail::current_omp_threads()];
  });
  std::vector<InferRequest> requests;
  std::vector<Tensor> inputs;
  for (int i = 0; i < 48; ++i) {
    const int64_t batch = i % 3 == 0 ? large_batch : 1 + i % 4;
    requests.push_back(compiled.create_infer_request());
    inputs.push_back(make_input(static_cast<float>(i % 7), 16, batch));
    requests.back().set_tensor("x", inputs.back());
    requests.back().start_async();
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].wait();
    expect_add_relu_output(inputs[i], requests[i].get_tensor("y"));
  }
  // One synchronous request of each size, alone in the pipeline.
  for (const int64_t batch : {int64_t{1}, large_batch}) {
    InferRequest request = compiled.create_infer_request();
    const Tensor input = make_input(3.f, 16, batch);
    request.set_tensor("x", input);
    request.infer();
    expect_add_relu_output(input, request.get_tensor("y"));
  }
  set_stage_hook(compiled, nullptr);
  // 16 + 1 large requests, 32 + 1 small ones.
  EXPECT_EQ(runs_by_threads, (std::map<int, int>{{1, 33}, {cores, 17}}));
}
