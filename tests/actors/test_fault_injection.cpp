// Fault injection with many requests in flight: an exception of every kind in every stage,
// std::bad_alloc inside a kernel, a stage that stalls past the requests' timeouts, and the
// compiled model destroyed while requests park in each stage or from inside a callback. In every
// case the affected requests fail with a typed troupe error, every other request completes
// correctly and exactly once, the counters add up, and the pipeline's credits and slots all come
// back: it then serves a full load again.

#include <gmock/gmock.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pipeline_fixture.hpp"

using namespace troupe;
using namespace troupe::test;
using ::testing::HasSubstr;

namespace {

constexpr auto bounded_wait = std::chrono::seconds(20);

const char* stage_name(detail::Stage stage) {
  return PipelineCounters::stage_names[static_cast<size_t>(stage)];
}

enum class Fault { runtime_error, bad_alloc, troupe_error, not_an_exception_class };

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::runtime_error:
      return "runtime_error";
    case Fault::bad_alloc:
      return "bad_alloc";
    case Fault::troupe_error:
      return "troupe_error";
    case Fault::not_an_exception_class:
      return "int";
  }
  return "?";
}

[[noreturn]] void throw_fault(Fault f) {
  switch (f) {
    case Fault::runtime_error:
      throw std::runtime_error("injected fault");
    case Fault::bad_alloc:
      throw std::bad_alloc();
    case Fault::troupe_error:
      throw ExecutionError("injected fault");
    case Fault::not_an_exception_class:
      throw 42;
  }
  throw 0;
}

// What the error of a request that met `fault` in `stage` must say.
std::string expected_text(Fault f, detail::Stage stage) {
  switch (f) {
    case Fault::runtime_error:
      return std::string(stage_name(stage)) + " stage: injected fault";
    case Fault::bad_alloc:
      return std::string(stage_name(stage)) + " stage: out of memory";
    case Fault::troupe_error:
      return "injected fault";
    case Fault::not_an_exception_class:
      return std::string(stage_name(stage)) + " stage: an exception of unknown type";
  }
  return "";
}

// Counts the callbacks of each request, so "exactly once" can be checked.
class CallbackTally {
 public:
  explicit CallbackTally(size_t n) : calls_(n) {}
  void attach(InferRequest& request, size_t index) {
    request.set_callback([this, index](std::exception_ptr) { count(index); });
  }
  void count(size_t index) { ++calls_[index]; }
  void expect_each_once() const {
    for (size_t i = 0; i < calls_.size(); ++i)
      EXPECT_EQ(calls_[i].load(), 1) << "callbacks of request " << i;
  }

 private:
  std::vector<std::atomic<int>> calls_;
};

// With no fault left, as many requests as the pipeline admits (twice over) complete, correctly:
// a slot, credit or in-flight count lost to a fault would leave some of them parked for good.
void expect_full_capacity(CompiledModel& compiled) {
  const int n = 2 * static_cast<int>(compiled.get_property(props::max_requests_in_flight).as_int());
  std::vector<InferRequest> requests;
  std::vector<Tensor> inputs;
  for (int i = 0; i < n; ++i) {
    requests.push_back(compiled.create_infer_request());
    inputs.push_back(make_input(static_cast<float>(i % 11)));
    requests.back().set_tensor("x", inputs.back());
    requests.back().start_async();
  }
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(requests[i].wait_for(bounded_wait)) << "request " << i << " never completed";
    expect_add_relu_output(inputs[i], requests[i].get_tensor("y"));
  }
  // Postprocess counts a request out just after handing it to completion, which may wake the
  // waiter first: the count must reach 0 soon, not at once.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (compiled.impl()->context().in_flight.count() != 0 &&
         std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(compiled.impl()->context().in_flight.count(), 0);
}

// `n` add_relu requests started at once, each with its own input (`distinct` different ones)
// and its callbacks counted.
struct StartedRequests {
  StartedRequests(CompiledModel& compiled, size_t n, int distinct) : tally(n) {
    for (size_t i = 0; i < n; ++i) {
      requests.push_back(compiled.create_infer_request());
      inputs.push_back(make_input(static_cast<float>(i % static_cast<size_t>(distinct))));
      requests.back().set_tensor("x", inputs.back());
      tally.attach(requests.back(), i);
      requests.back().start_async();
    }
  }
  std::vector<InferRequest> requests;
  std::vector<Tensor> inputs;
  CallbackTally tally;
};

struct StageFault {
  detail::Stage stage;
  Fault fault;
};

class FaultInEachStage : public ::testing::TestWithParam<StageFault> {};

TEST_P(FaultInEachStage, FailsOnlyItsRequestsWithATypedErrorAndTheModelKeepsServing) {
  const auto [stage, fault] = GetParam();
  Core core;
  auto compiled = core.compile_model(make_add_relu_model(), "CPU", {{props::num_streams, 2}});
  std::mutex mutex;
  std::set<uint64_t> injected;
  set_stage_hook(compiled, [&, stage = stage, fault = fault](detail::Stage s, uint64_t id) {
    if (s != stage || id % 4 != 1) return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      injected.insert(id);
    }
    throw_fault(fault);
  });
  constexpr size_t n = 96;
  StartedRequests started(compiled, n, 13);
  auto& [requests, inputs, tally] = started;
  size_t failed = 0;
  for (size_t i = 0; i < n; ++i) {
    try {
      ASSERT_TRUE(requests[i].wait_for(bounded_wait)) << "request " << i << " never completed";
      expect_add_relu_output(inputs[i], requests[i].get_tensor("y"));
    } catch (const ExecutionError& e) {
      EXPECT_THAT(e.what(), HasSubstr(expected_text(fault, stage)));
      ++failed;
    }
  }
  EXPECT_EQ(failed, injected.size());
  EXPECT_GE(failed, n / 4 - 1);
  tally.expect_each_once();
  const PipelineCounters counters = compiled.counters();
  EXPECT_EQ(counters.failure, failed);
  EXPECT_EQ(counters.success, n - failed);

  set_stage_hook(compiled, nullptr);
  expect_full_capacity(compiled);
}

std::vector<StageFault> every_stage_and_fault() {
  std::vector<StageFault> cases;
  for (size_t s = 0; s < detail::stage_count; ++s)
    for (Fault f : {Fault::runtime_error, Fault::bad_alloc, Fault::troupe_error,
                    Fault::not_an_exception_class})
      cases.push_back({static_cast<detail::Stage>(s), f});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(FaultInjection, FaultInEachStage,
                         ::testing::ValuesIn(every_stage_and_fault()),
                         [](const ::testing::TestParamInfo<StageFault>& info) {
                           return std::string(stage_name(info.param.stage)) + "_" +
                                  fault_name(info.param.fault);
                         });

// A test-only op: identity on [?, 16] whose kernel throws std::bad_alloc when a row starts
// negative, as an allocation inside a kernel would.
void register_alloc_failure_op() {
  register_checked_identity("TestBadAllocIfNegative", [](const Node&, const Tensor& x) {
    const int64_t rows = x.shape()[0], width = x.shape()[1];
    for (int64_t row = 0; row < rows; ++row)
      if (x.value_at(row * width) < 0) throw std::bad_alloc();
  });
}

// y = Relu(TestBadAllocIfNegative(x) + 1) on x [?, 16]: the add_relu model with a failing kernel.
std::shared_ptr<Model> make_alloc_failure_model() {
  register_alloc_failure_op();
  ModelBuilder b("alloc_failure");
  auto x = b.input("x", ElementType::f32, {Shape::dynamic, 16});
  auto checked = b.op("TestBadAllocIfNegative", {x}, {}, "allocator");
  auto one = b.constant("one", Tensor::from_vector<float>({1}, {1.f}));
  b.output(b.op("Relu", {b.op("Add", {checked, one})}), "y");
  return b.build();
}

TEST(FaultInjection, BadAllocInAKernelFailsOnlyThatRequestEvenInsideAMergedBatch) {
  Core core;
  // Dynamic batching merges waiting requests: a merged run that fails reruns each alone.
  auto compiled = core.compile_model(make_alloc_failure_model(), "CPU",
                                     {{props::num_streams, 2},
                                      {"max_batch_size", 8},
                                      {"max_queue_delay_microseconds", 2000},
                                      {"adaptive_batch_size", false}});
  constexpr size_t n = 80;
  std::vector<InferRequest> requests;
  std::vector<Tensor> inputs;
  CallbackTally tally(n);
  for (size_t i = 0; i < n; ++i) {
    requests.push_back(compiled.create_infer_request());
    // make_input(base) starts at base - 8: every fifth request starts negative.
    inputs.push_back(make_input(i % 5 == 0 ? 0.f : 9.f + static_cast<float>(i % 7)));
    requests.back().set_tensor("x", inputs.back());
    tally.attach(requests.back(), i);
    requests.back().start_async();
  }
  for (size_t i = 0; i < n; ++i) {
    if (i % 5 == 0) {
      try {
        requests[i].wait_for(bounded_wait);
        ADD_FAILURE() << "request " << i << " should have failed";
      } catch (const ExecutionError& e) {
        EXPECT_THAT(e.what(), HasSubstr("allocator"));
        EXPECT_THAT(e.what(), HasSubstr("bad_alloc"));
      }
      continue;
    }
    ASSERT_TRUE(requests[i].wait_for(bounded_wait)) << "request " << i << " never completed";
    const auto x = inputs[i].to_vector<float>(), y = requests[i].get_tensor("y").to_vector<float>();
    for (size_t k = 0; k < x.size(); ++k)
      ASSERT_FLOAT_EQ(y[k], std::max(x[k] + 1.f, 0.f)) << "request " << i << " element " << k;
  }
  tally.expect_each_once();
  EXPECT_EQ(compiled.counters().failure, n / 5);
  EXPECT_EQ(compiled.counters().success, n - n / 5);
}

class StallInEachStage : public ::testing::TestWithParam<detail::Stage> {};

// One request stalls in a stage for longer than the others' queue timeout: those still waiting for
// the scheduler fail with RequestTimeout and never run, the rest complete correctly, each exactly
// once, and the model serves a full load afterwards.
TEST_P(StallInEachStage, RequestsPastTheirTimeoutFailTypedAndTheModelKeepsServing) {
  const detail::Stage stage = GetParam();
  Core core;
  auto compiled = core.compile_model(make_add_relu_model(), "CPU",
                                     {{props::num_streams, 1},
                                      {"default_timeout_microseconds", 40'000},
                                      {"timeout_action", "REJECT"}});
  std::atomic<bool> stalled{false};
  set_stage_hook(compiled, [&, stage](detail::Stage s, uint64_t) {
    if (s == stage && !stalled.exchange(true))
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
  });
  constexpr size_t n = 40;
  StartedRequests started(compiled, n, 9);
  auto& [requests, inputs, tally] = started;
  size_t timed_out = 0;
  for (size_t i = 0; i < n; ++i) {
    try {
      ASSERT_TRUE(requests[i].wait_for(bounded_wait)) << "request " << i << " never completed";
      expect_add_relu_output(inputs[i], requests[i].get_tensor("y"));
    } catch (const RequestTimeout&) {
      ++timed_out;
    }
  }
  EXPECT_GT(timed_out, 0u) << "nothing waited past its timeout behind the stall";
  EXPECT_LT(timed_out, n);
  tally.expect_each_once();
  EXPECT_EQ(compiled.counters().failure, timed_out);
  EXPECT_EQ(compiled.counters().success, n - timed_out);
  set_stage_hook(compiled, nullptr);
  compiled.set_property({{"default_timeout_microseconds", 0}});
  expect_full_capacity(compiled);
}

std::string stage_param_name(const ::testing::TestParamInfo<detail::Stage>& info) {
  return stage_name(info.param);
}

INSTANTIATE_TEST_SUITE_P(FaultInjection, StallInEachStage,
                         ::testing::Values(detail::Stage::preprocess, detail::Stage::upload,
                                           detail::Stage::execute, detail::Stage::download,
                                           detail::Stage::postprocess),
                         stage_param_name);

class DestroyWhileParkedInEachStage : public ::testing::TestWithParam<detail::Stage> {};

// The model, its requests and the core go out of scope while requests are slowed in one stage and
// park in front of it: every request's callback runs exactly once, with its result or Cancelled.
TEST_P(DestroyWhileParkedInEachStage, EveryRequestCompletesOnceWithItsResultOrCancelled) {
  const detail::Stage stage = GetParam();
  constexpr size_t n = 48;
  CallbackTally tally(n);
  Outcomes outcomes;
  {
    Core core;
    auto compiled = core.compile_model(make_add_relu_model(), "CPU", {{props::num_streams, 2}});
    set_stage_hook(compiled, [stage](detail::Stage s, uint64_t) {
      if (s == stage) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    });
    std::vector<InferRequest> requests;
    for (size_t i = 0; i < n; ++i) {
      requests.push_back(compiled.create_infer_request());
      requests.back().set_tensor("x", make_input(static_cast<float>(i)));
      requests.back().set_callback([&, i](std::exception_ptr e) {
        tally.count(i);
        outcomes.record(e);
      });
      requests.back().start_async();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  tally.expect_each_once();
  EXPECT_EQ(outcomes.succeeded + outcomes.cancelled, static_cast<int>(n));
  EXPECT_EQ(outcomes.other.load(), 0);
  EXPECT_GT(outcomes.cancelled.load(), 0) << "nothing was still parked when the model went";
}

INSTANTIATE_TEST_SUITE_P(FaultInjection, DestroyWhileParkedInEachStage,
                         ::testing::Values(detail::Stage::preprocess, detail::Stage::upload,
                                           detail::Stage::execute, detail::Stage::download,
                                           detail::Stage::postprocess),
                         stage_param_name);

// The last reference to the model is dropped inside the first callback while the other requests
// park behind a slow execute stage: they all complete exactly once, and nothing deadlocks.
TEST(FaultInjection, TheModelDroppedInsideACallbackWhileOthersParkCompletesEachOnce) {
  constexpr size_t n = 32;
  CallbackTally tally(n);
  Outcomes outcomes;
  {
    Core core;
    auto holder = std::make_shared<std::shared_ptr<CompiledModel>>(
        std::make_shared<CompiledModel>(core.compile_model(make_add_relu_model())));
    set_stage_hook(**holder, [](detail::Stage s, uint64_t) {
      if (s == detail::Stage::execute) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    });
    std::mutex mutex;
    std::vector<InferRequest> requests;
    // Every request exists before the first starts: once one completes, its callback drops the
    // model, and the holder must not be read again outside the mutex.
    for (size_t i = 0; i < n; ++i) {
      requests.push_back((*holder)->create_infer_request());
      requests.back().set_tensor("x", make_input(static_cast<float>(i)));
      requests.back().set_callback([&, i, holder](std::exception_ptr e) {
        tally.count(i);
        {
          std::lock_guard<std::mutex> lock(mutex);
          holder->reset();
        }
        outcomes.record(e);
      });
    }
    for (auto& r : requests) r.start_async();
    for (auto& r : requests) {
      try {
        EXPECT_TRUE(r.wait_for(bounded_wait));
      } catch (const Cancelled&) {
      }
    }
  }
  tally.expect_each_once();
  EXPECT_EQ(outcomes.succeeded + outcomes.cancelled, static_cast<int>(n));
  EXPECT_EQ(outcomes.other.load(), 0);
}

}  // namespace
