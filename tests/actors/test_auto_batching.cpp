// Automatic batching in the execute stage (AUTO_BATCH_MAX_SIZE): requests waiting at a stream are
// merged into one run along the leading dimension and their outputs split back. Every request
// must get exactly its own result, whatever it was merged with, and a failing request must fail
// alone.

#include <gmock/gmock.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "actors/pipeline_stats.hpp"
#include "pipeline_fixture.hpp"
#include "troupe/model_builder.hpp"

using namespace troupe;
using namespace troupe::test;
using ::testing::HasSubstr;

namespace {

// y = Gather(table, idx) on idx [?]: an index out of range fails the run that contains it.
std::shared_ptr<Model> make_lookup_model() {
  ModelBuilder b("lookup");
  auto idx = b.input("idx", ElementType::i64, {Shape::dynamic});
  auto table = b.constant("table", random_tensor({10, 3}, 9));
  b.output(b.op("Gather", {table, idx}, {{"axis", int64_t{0}}}), "y");
  return b.build();
}

// Two inputs and three outputs, one of them an input passed through: per-index offsets.
std::shared_ptr<Model> make_two_by_three_model() {
  ModelBuilder b("two_by_three");
  auto a = b.input("a", ElementType::f32, {Shape::dynamic, 4});
  auto c = b.input("c", ElementType::f32, {Shape::dynamic, 3});
  auto w1 = b.constant("w1", random_tensor({4, 5}, 21));
  auto w2 = b.constant("w2", random_tensor({4, 2}, 22));
  b.output(b.op("Relu", {b.op("MatMul", {a, w1})}), "y1");
  b.output(b.op("Concat", {c, b.op("MatMul", {a, w2})}, {{"axis", int64_t{1}}}), "y2");
  b.output(b.op("Identity", {a}), "a_out");  // may become the input itself once compiled
  return b.build();
}

// y = x · xᵀ on x [?, 4]: dynamic leading dimensions, but the rows of different requests meet.
std::shared_ptr<Model> make_row_mixing_model() {
  ModelBuilder b("row_mixing");
  auto x = b.input("x", ElementType::f32, {Shape::dynamic, 4});
  b.output(b.op("MatMul", {x, b.op("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 0}}})}),
           "y");
  return b.build();
}

// These tests check what merging does, so batches are as large as the queue allows rather than
// the size the scheduler's tuner would learn.
AnyMap auto_batching_properties(int max_size, int streams = 1) {
  return {{props::auto_batch_max_size, max_size},
          {"adaptive_batch_size", false},
          {props::num_streams, streams},
          {props::performance_mode, "THROUGHPUT"}};
}

// Holds every request at the execute stage until `release()`, so the ones behind it pile up in
// the execute stream's mailbox and are merged.
class MergeGate {
 public:
  explicit MergeGate(CompiledModel& compiled) {
    set_stage_hook(compiled, [this](detail::Stage stage, uint64_t) {
      std::unique_lock<std::mutex> lock(mutex_);
      if (stage == detail::Stage::upload) {
        ++uploaded_;
        cv_.notify_all();
      }
      if (stage != detail::Stage::execute) return;
      cv_.wait(lock, [&] { return open_; });
    });
  }
  /// Waits until `count` requests have entered the upload stage, or until no more have entered
  /// for 200 ms (how many the pipeline admits behind a held execute depends on its credits), at
  /// most 10 s; then a little longer for upload to hand the last of them on: a fixed sleep
  /// instead merged fewer requests when the machine was busy.
  void wait_for_uploads(size_t count) {
    {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      std::unique_lock<std::mutex> lock(mutex_);
      while (uploaded_ < count && std::chrono::steady_clock::now() < give_up) {
        const size_t before = uploaded_;
        cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return uploaded_ >= count; });
        if (uploaded_ == before) break;  // quiet: nothing more will come while execute is held
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
  size_t uploaded_ = 0;
};

std::vector<int> execute_batches(CompiledModel& compiled) {
  std::vector<int> batches;
  for (const auto& trace : compiled.impl()->context().stats.traces())
    batches.push_back(trace.stages[static_cast<size_t>(detail::Stage::execute)].batch);
  return batches;
}

void expect_near_all(const Tensor& expected, const Tensor& actual, const std::string& what) {
  ASSERT_EQ(expected.shape(), actual.shape()) << what;
  auto e = expected.to_vector<float>(), a = actual.to_vector<float>();
  for (size_t i = 0; i < e.size(); ++i) ASSERT_NEAR(e[i], a[i], 1e-5f) << what << " element " << i;
}

using NamedTensors = std::map<std::string, Tensor>;

// Compiles `model` with automatic batching of up to `max_size` on one stream and, as the
// reference, without. Starts one request per entry of `inputs` while a gate holds the execute
// stage, so they queue up and merge, then checks every output of each against the reference run
// on the same inputs alone. Returns the batching compiled model, for its traces and counters.
CompiledModel run_gated_and_check(Core& core, const std::shared_ptr<Model>& model, int max_size,
                                  const std::vector<NamedTensors>& inputs) {
  CompiledModel reference = core.compile_model(model, "CPU", {{props::num_streams, 1}});
  CompiledModel compiled = core.compile_model(model, "CPU", auto_batching_properties(max_size));
  MergeGate gate(compiled);
  std::vector<InferRequest> requests;
  for (const NamedTensors& in : inputs) {
    requests.push_back(compiled.create_infer_request());
    for (const auto& [name, tensor] : in) requests.back().set_tensor(name, tensor);
    requests.back().start_async();
  }
  // Let them queue behind the gate: upload holds two execute slots per stream, each a batch of
  // up to max_size requests; the rest park in front of upload until slots return.
  gate.wait_for_uploads(std::min(inputs.size(), static_cast<size_t>(2 * max_size)));
  gate.release();
  auto check = reference.create_infer_request();
  for (size_t i = 0; i < inputs.size(); ++i) {
    requests[i].wait();
    for (const auto& [name, tensor] : inputs[i]) check.set_tensor(name, tensor);
    check.infer();
    for (const ValueInfo& out : compiled.outputs())
      expect_near_all(check.get_tensor(out.name), requests[i].get_tensor(out.name),
                      out.name + " of request " + std::to_string(i));
  }
  set_stage_hook(compiled, nullptr);  // the gate goes out of scope
  return compiled;
}

}  // namespace

TEST(AutoBatching, PropertyIsValidatedReportedAndSizesTheRequests) {
  Core core;
  EXPECT_EQ(core.get_property("CPU", props::auto_batch_max_size).as_int(), 1);
  for (const Any& bad : {Any(0), Any(257), Any(std::string("four"))}) {
    try {
      core.compile_model(make_linear_model(), "CPU", {{props::auto_batch_max_size, bad}});
      ADD_FAILURE() << "accepted " << bad.as_string();
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr(props::auto_batch_max_size));
    }
  }
  auto compiled = core.compile_model(make_linear_model(), "CPU", auto_batching_properties(4, 2));
  EXPECT_EQ(compiled.get_property(props::auto_batch_max_size).as_int(), 4);
  // A full batch waiting at each stream while another runs.
  EXPECT_EQ(compiled.get_property(props::optimal_number_of_infer_requests).as_int(), 16);
  EXPECT_GE(compiled.get_property(props::max_requests_in_flight).as_int(), 16);

  // A model with a static leading dimension cannot batch: it runs unbatched and says so.
  auto fixed = core.compile_model(make_add_relu_model(1), "CPU", auto_batching_properties(4, 2));
  EXPECT_EQ(fixed.get_property(props::auto_batch_max_size).as_int(), 1);
  EXPECT_EQ(fixed.get_property(props::optimal_number_of_infer_requests).as_int(), 4);
}

TEST(AutoBatching, ATrainingModeBatchNormIsNeverBatched) {
  // Its statistics run over the whole batch: merged requests would normalize each other's rows.
  ModelBuilder b("bn_training");
  auto x = b.input("x", ElementType::f32, {Shape::dynamic, 2});
  auto c = [&](const std::string& name, float v) {
    return b.constant(name, Tensor::from_vector<float>({2}, {v, v}));
  };
  b.output(b.op("BatchNormalization", {x, c("scale", 1), c("bias", 0), c("mean", 0), c("var", 1)},
                {{"training_mode", int64_t{1}}}),
           "y");
  Core core;
  auto compiled = core.compile_model(b.build(), "CPU", auto_batching_properties(4, 2));
  EXPECT_EQ(compiled.get_property(props::auto_batch_max_size).as_int(), 1);
}

TEST(AutoBatching, WaitingRequestsAreMergedAndEachGetsItsOwnResult) {
  Core core;
  constexpr int n = 24;
  std::vector<NamedTensors> inputs;
  for (int i = 0; i < n; ++i)
    inputs.push_back(
        {{"x", random_tensor({1, features}, 100 + static_cast<unsigned>(i), -2.f, 2.f)}});
  auto compiled = run_gated_and_check(core, make_linear_model(), 4, inputs);
  const auto batches = execute_batches(compiled);
  ASSERT_EQ(batches.size(), static_cast<size_t>(n));
  EXPECT_EQ(*std::max_element(batches.begin(), batches.end()), 4);
  // The 7 requests queued behind the gated one (two slots of 4, less the one it holds) run merged;
  // how the 16 parked in front of upload meet afterwards depends on timing.
  EXPECT_GE(std::count_if(batches.begin(), batches.end(), [](int b) { return b > 1; }), 7);
  EXPECT_GT(compiled.impl()->context().stats.summary().stages[2].mean_batch, 1.0);
}

TEST(AutoBatching, OnlyRequestsOfTheSameShapeAreMerged) {
  Core core;
  std::vector<NamedTensors> inputs;
  for (int i = 0; i < 30; ++i) {
    const int64_t rows = 1 + i % 3;  // 1, 2 and 3 rows interleaved
    inputs.push_back({{"x", random_tensor({rows, features}, 300 + static_cast<unsigned>(i))}});
  }
  auto compiled = run_gated_and_check(core, make_linear_model(), 8, inputs);
  const auto batches = execute_batches(compiled);
  EXPECT_GT(*std::max_element(batches.begin(), batches.end()), 1);
}

TEST(AutoBatching, ARequestThatFailsInsideABatchFailsAlone) {
  Core core;
  auto compiled = core.compile_model(make_lookup_model(), "CPU", auto_batching_properties(8));
  MergeGate gate(compiled);
  constexpr int n = 16, bad = 5;
  std::vector<InferRequest> requests;
  for (int i = 0; i < n; ++i) {
    requests.push_back(compiled.create_infer_request());
    const int64_t index = i == bad ? 42 : i % 10;  // the table has 10 rows
    requests.back().set_tensor("idx", Tensor::from_vector<int64_t>({2}, {index, 9 - i % 10}));
    requests.back().start_async();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  gate.release();
  const Tensor table = random_tensor({10, 3}, 9);
  const auto rows = table.to_vector<float>();
  for (int i = 0; i < n; ++i) {
    if (i == bad) {
      EXPECT_THROW(requests[i].wait(), Error);
      continue;
    }
    ASSERT_NO_THROW(requests[i].wait()) << i;
    const auto y = requests[i].get_tensor("y").to_vector<float>();
    ASSERT_EQ(y.size(), 6u);
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(y[c], rows[(i % 10) * 3 + c]) << i;
      EXPECT_EQ(y[3 + c], rows[(9 - i % 10) * 3 + c]) << i;
    }
  }
  // The bad request was merged with others, the merged run failed, and all ran alone again.
  EXPECT_GE(compiled.impl()->context().batch_fallbacks.load(), 1);
  // The pipeline goes on.
  requests[bad].set_tensor("idx", Tensor::from_vector<int64_t>({2}, {1, 2}));
  EXPECT_NO_THROW(requests[bad].infer());
}

TEST(AutoBatching, ACancelledRequestLeavesItsBatch) {
  Core core;
  auto compiled = core.compile_model(make_linear_model(), "CPU", auto_batching_properties(8));
  MergeGate gate(compiled);
  std::vector<InferRequest> requests;
  for (int i = 0; i < 12; ++i) {
    requests.push_back(compiled.create_infer_request());
    requests.back().set_tensor("x", random_tensor({1, features}, 500 + static_cast<unsigned>(i)));
    requests.back().start_async();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  requests[7].cancel();
  gate.release();
  for (int i = 0; i < 12; ++i) {
    if (i == 7) {
      // It was waiting behind the gate, so the execute stage's own check cancels it.
      EXPECT_THROW(requests[i].wait(), Cancelled);
      continue;
    }
    EXPECT_NO_THROW(requests[i].wait()) << i;
  }
  const auto batches = execute_batches(compiled);
  EXPECT_GT(*std::max_element(batches.begin(), batches.end()), 1);
}

TEST(AutoBatching, ManyInFlightFromSeveralThreadsWithProfiling) {
  Core core;
  auto reference = core.compile_model(make_linear_model(), "CPU", {{props::num_streams, 1}});
  AnyMap config = auto_batching_properties(4, 2);
  config[props::enable_profiling] = true;
  auto compiled = core.compile_model(make_linear_model(), "CPU", config);
  constexpr int threads = 4, per_thread = 8, rounds = 10;
  std::atomic<int> mismatches{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::vector<InferRequest> requests;
      std::vector<Tensor> inputs, expected;
      auto check = reference.create_infer_request();
      for (int i = 0; i < per_thread; ++i) {
        requests.push_back(compiled.create_infer_request());
        inputs.push_back(random_tensor({1, features}, static_cast<unsigned>(t * 100 + i)));
        requests.back().set_tensor("x", inputs.back());
        check.set_tensor("x", inputs.back());
        check.infer();
        expected.push_back(check.get_tensor("y").clone());
      }
      for (int r = 0; r < rounds; ++r) {
        for (auto& request : requests) request.start_async();
        for (int i = 0; i < per_thread; ++i) {
          requests[i].wait();
          auto e = expected[i].to_vector<float>(),
               a = requests[i].get_tensor("y").to_vector<float>();
          for (size_t k = 0; k < e.size(); ++k)
            if (std::abs(e[k] - a[k]) > 1e-5f) ++mismatches;
          // Per-node counters are there for merged runs too.
          const auto info = requests[i].profiling_info();
          if (info.size() <= 5) ++mismatches;
        }
      }
    });
  for (auto& w : workers) w.join();
  EXPECT_EQ(mismatches.load(), 0);
  const auto summary = compiled.impl()->context().stats.summary();
  EXPECT_EQ(summary.requests, static_cast<size_t>(threads * per_thread * rounds));
  EXPECT_EQ(summary.failed, 0u);
}

TEST(AutoBatching, DestroyingTheModelWithRequestsQueuedCompletesEachOnce) {
  std::atomic<int> callbacks{0};
  constexpr int n = 40;
  {
    Core core;
    auto compiled = core.compile_model(make_linear_model(), "CPU", auto_batching_properties(4, 2));
    std::vector<InferRequest> requests;
    for (int i = 0; i < n; ++i) {
      requests.push_back(compiled.create_infer_request());
      requests.back().set_tensor("x", random_tensor({1, features}, static_cast<unsigned>(i)));
      requests.back().set_callback([&](std::exception_ptr) { ++callbacks; });
    }
    for (auto& request : requests) request.start_async();
    // The requests, then the compiled model, go out of scope with requests in every stage; the
    // pipeline shuts down when the last handle to it goes.
  }
  EXPECT_EQ(callbacks.load(), n);
}

TEST(AutoBatching, SeveralInputsAndOutputsEachGetTheirShare) {
  Core core;
  std::vector<NamedTensors> inputs;
  for (unsigned i = 0; i < 13; ++i)
    inputs.push_back(
        {{"a", random_tensor({2, 4}, 700 + i)}, {"c", random_tensor({2, 3}, 800 + i)}});
  auto compiled = run_gated_and_check(core, make_two_by_three_model(), 4, inputs);  // y1, y2, a_out
  ASSERT_EQ(compiled.get_property(props::auto_batch_max_size).as_int(), 4);
  const auto batches = execute_batches(compiled);
  EXPECT_GT(*std::max_element(batches.begin(), batches.end()), 1) << "no run was merged";
  EXPECT_EQ(compiled.impl()->context().batch_fallbacks.load(), 0);
}

TEST(AutoBatching, AModelThatMixesRequestsIsCaughtAndRunsThemAlone) {
  Core core;
  std::vector<NamedTensors> inputs;
  for (unsigned i = 0; i < 12; ++i) inputs.push_back({{"x", random_tensor({1, 4}, 900 + i)}});
  auto compiled = run_gated_and_check(core, make_row_mixing_model(), 4, inputs);
  // A merged run gave [k, k] instead of k x [1, 1]: caught once, these shapes never merge again.
  EXPECT_EQ(compiled.impl()->context().batch_fallbacks.load(), 1);
  const auto batches = execute_batches(compiled);
  EXPECT_EQ(*std::max_element(batches.begin(), batches.end()), 1) << "a merged run was kept";
}

// The batching obstacles of RoiAlign (a row per roi, batch indices per request) and of a
// MaxUnpool whose indices come from outside the graph: such models run each request alone.
TEST(AutoBatching, RoisAndOutsideUnpoolIndicesAreNeverBatched) {
  auto batch_size = [](std::shared_ptr<Model> model) {
    Core core;
    auto compiled = core.compile_model(std::move(model), "CPU", {{props::auto_batch_max_size, 8}});
    return compiled.get_property(props::auto_batch_max_size).as_int();
  };
  {
    ModelBuilder b("roi_align");
    auto x = b.input("x", ElementType::f32, {Shape::dynamic, 1, 4, 4});
    auto rois = b.input("rois", ElementType::f32, {Shape::dynamic, 4});
    auto indices = b.input("indices", ElementType::i64, {Shape::dynamic});
    b.output(b.op("RoiAlign", {x, rois, indices}), "y");
    EXPECT_EQ(batch_size(b.build()), 1);
  }
  const Attributes window{{"kernel_shape", std::vector<int64_t>{2, 2}},
                          {"strides", std::vector<int64_t>{2, 2}}};
  {
    ModelBuilder b("unpool_outside_indices");
    auto x = b.input("x", ElementType::f32, {Shape::dynamic, 1, 2, 2});
    auto i = b.input("i", ElementType::i64, {Shape::dynamic, 1, 2, 2});
    b.output(b.op("MaxUnpool", {x, i}, window), "y");
    EXPECT_EQ(batch_size(b.build()), 1);
  }
  {
    // Pooled and unpooled in one run: the indices are the merged run's own.
    ModelBuilder b("pool_unpool");
    auto x = b.input("x", ElementType::f32, {Shape::dynamic, 1, 4, 4});
    auto pooled = b.op_multi("MaxPool", {x}, 2, window, "pool");
    b.output(b.op("MaxUnpool", {pooled[0], pooled[1]}, window), "y");
    EXPECT_EQ(batch_size(b.build()), 8);
  }
}
