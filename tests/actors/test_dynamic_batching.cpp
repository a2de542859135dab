// The scheduler actor with Triton's dynamic-batching rules, through the public API: batch delay,
// priorities, queue-full refusal, both timeout actions, preserve_ordering, the actor message's
// priority and timeout, live reconfiguration, and many requests in flight from many threads.

#include <gmock/gmock.h>

#include <condition_variable>
#include <mutex>
#include <numeric>
#include <random>
#include <set>

#include "pipeline_fixture.hpp"
#include "troupe/actor_interface.hpp"
#include "troupe/model_builder.hpp"

using namespace troupe;
using namespace troupe::test;
using ::testing::HasSubstr;

namespace {

Tensor sample(unsigned seed) {
  return random_tensor({1, features}, seed);
}

// The reference: each sample run alone on a model without a scheduler policy.
class Reference {
 public:
  explicit Reference(Core& core)
      : compiled_(core.compile_model(make_linear_model(), "CPU", {{props::num_streams, 1}})),
        request_(compiled_.create_infer_request()) {}
  void expect_output_of(unsigned seed, const Tensor& actual) {
    std::lock_guard<std::mutex> lock(mutex_);
    request_.set_tensor("x", sample(seed));
    request_.infer();
    auto e = request_.get_tensor("y").to_vector<float>(), a = actual.to_vector<float>();
    ASSERT_EQ(e.size(), a.size());
    for (size_t i = 0; i < e.size(); ++i) ASSERT_NEAR(e[i], a[i], 1e-5f) << "seed " << seed;
  }

 private:
  std::mutex mutex_;
  CompiledModel compiled_;
  InferRequest request_;
};

// Holds execute until opened (at the latest when the gate goes out of scope, so a failed
// assertion cannot leave the model's destructor waiting for held requests); counts how often each
// request id entered execute. The hook owns the gate's state, so it outlives the gate.
class ExecuteGate {
 public:
  explicit ExecuteGate(CompiledModel& compiled) : state_(std::make_shared<State>()) {
    set_stage_hook(compiled, [state = state_](detail::Stage stage, uint64_t id) {
      if (stage != detail::Stage::execute) return;
      std::unique_lock<std::mutex> lock(state->mutex);
      ++state->executed[id];
      state->cv.notify_all();
      state->cv.wait(lock, [&] { return state->open; });
    });
  }
  ~ExecuteGate() { open(); }
  void open() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->open = true;
    state_->cv.notify_all();
  }
  bool wait_executing(size_t n) {
    std::unique_lock<std::mutex> lock(state_->mutex);
    return state_->cv.wait_for(lock, std::chrono::seconds(10),
                               [&] { return state_->executed.size() >= n; });
  }
  std::map<uint64_t, int> executed() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->executed;
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    bool open = false;
    std::map<uint64_t, int> executed;
  };
  std::shared_ptr<State> state_;
};

// Records the order in which requests complete (by the tag given at start).
class CompletionLog {
 public:
  void start(InferRequest& request, int tag) {
    request.set_callback([this, tag](std::exception_ptr) {
      std::lock_guard<std::mutex> lock(mutex_);
      order_.push_back(tag);
    });
    request.start_async();
  }
  std::vector<int> order() {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_;
  }
  size_t position(int tag) {
    auto o = order();
    return static_cast<size_t>(std::find(o.begin(), o.end(), tag) - o.begin());
  }

 private:
  std::mutex mutex_;
  std::vector<int> order_;
};

int batch_of(const InferRequest& request) {
  for (const ProfilingInfo& p : request.profiling_info())
    if (p.name == stage_names[2]) return static_cast<int>(p.batch_size);
  return -1;
}

}  // namespace

TEST(DynamicBatching, APartialBatchWaitsForTheDelayAFullOneLeavesAtOnce) {
  Core core;
  Reference reference(core);
  // Triton's rules exactly: batches as large as the queue allows, not the tuner's learned size.
  auto compiled = core.compile_model(make_linear_model(), "CPU",
                                     {{"max_batch_size", 4},
                                      {"max_queue_delay_microseconds", 1'000'000},
                                      {"adaptive_batch_size", false},
                                      {props::num_streams, 1}});
  EXPECT_EQ(compiled.get_property("max_queue_delay_microseconds").as_int(), 1'000'000);
  std::vector<InferRequest> requests(4);
  // Execute runs the first request of new shapes alone (to learn its output shapes); a full
  // batch of four leaves at once, so this one does not wait for the delay either.
  {
    std::vector<InferRequest> warm(4);
    for (unsigned i = 0; i < 4; ++i) {
      warm[i] = compiled.create_infer_request();
      warm[i].set_tensor("x", sample(100 + i));
      warm[i].start_async();
    }
    for (auto& r : warm) r.wait();
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (unsigned i = 0; i < 4; ++i) {
    requests[i] = compiled.create_infer_request();
    requests[i].set_tensor("x", sample(i));
    requests[i].start_async();
  }
  for (unsigned i = 0; i < 4; ++i) {
    requests[i].wait();
    reference.expect_output_of(i, requests[i].get_tensor("y"));
  }
  // Four requests fill the batch: nobody waited for the 1 s delay (bound generous for sanitizers).
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(700));
  EXPECT_EQ(batch_of(requests[0]), 4);

  const auto t1 = std::chrono::steady_clock::now();
  for (unsigned i = 0; i < 2; ++i) {
    requests[i].set_tensor("x", sample(10 + i));
    requests[i].start_async();
  }
  for (unsigned i = 0; i < 2; ++i) requests[i].wait();
  EXPECT_GE(std::chrono::steady_clock::now() - t1, std::chrono::milliseconds(990));
  EXPECT_EQ(batch_of(requests[0]), 2);
  EXPECT_EQ(batch_of(requests[1]), 2);
  reference.expect_output_of(11, requests[1].get_tensor("y"));
}

TEST(DynamicBatching, HigherPriorityRequestsOvertakeWaitingOnes) {
  Core core;
  auto compiled = core.compile_model(
      make_linear_model(), "CPU",
      {{"priority_levels", 2}, {"default_priority_level", 2}, {props::num_streams, 1}});
  ExecuteGate gate(compiled);
  CompletionLog log;
  std::vector<InferRequest> requests(8);
  for (int i = 0; i < 8; ++i) {
    requests[i] = compiled.create_infer_request();
    requests[i].set_tensor("x", sample(static_cast<unsigned>(i)));
  }
  // Six of the default (lowest) level: one enters the stages (the scheduler's credit), five wait.
  for (int i = 0; i < 6; ++i) log.start(requests[i], i);
  ASSERT_TRUE(gate.wait_executing(1));
  for (int i = 6; i < 8; ++i) {
    requests[i].set_priority(1);
    log.start(requests[i], i);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let them reach the scheduler
  gate.open();
  for (auto& r : requests) r.wait();
  for (int high : {6, 7})
    for (int low : {2, 3, 4, 5}) EXPECT_LT(log.position(high), log.position(low)) << high << low;
  // An out-of-range priority fails the request by name; the model goes on.
  requests[0].set_priority(3);
  try {
    requests[0].infer();
    ADD_FAILURE() << "priority 3 of 2 levels accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("priority 3"));
  }
  requests[0].set_priority(0);
  requests[0].infer();
}

namespace {

// Two streams, two priority levels, and the top level's stream or not. Batching makes the execute
// stages threads of their own (a hook may hold them).
CompiledModel two_priority_streams(Core& core, bool top_priority_stream) {
  return core.compile_model(make_linear_model(), "CPU",
                            {{"priority_levels", 2},
                             {"default_priority_level", 2},
                             {"max_batch_size", 2},
                             {"adaptive_batch_size", false},
                             {"top_priority_stream", top_priority_stream},
                             {props::num_streams, 2}});
}

// Holds execute's entries by their order: the first two (a lower request on each ordinary stream)
// until open_low(), the third until open_top() when `hold_third`; every gate opens at the latest
// when this goes out of scope. The hook owns the state, so it outlives the gates.
class EntryGates {
 public:
  EntryGates(CompiledModel& compiled, bool hold_third) : state_(std::make_shared<State>()) {
    set_stage_hook(compiled, [state = state_, hold_third](detail::Stage stage, uint64_t) {
      if (stage != detail::Stage::execute) return;
      std::unique_lock<std::mutex> lock(state->mutex);
      const int k = state->entered++;
      state->cv.notify_all();
      if (k < 2) state->cv.wait(lock, [&] { return state->low_open; });
      if (k == 2 && hold_third) state->cv.wait(lock, [&] { return state->top_open; });
    });
  }
  ~EntryGates() {
    open(&State::low_open);
    open(&State::top_open);
  }
  bool wait_entered(int n) {
    std::unique_lock<std::mutex> lock(state_->mutex);
    return state_->cv.wait_for(lock, std::chrono::seconds(10),
                               [&] { return state_->entered >= n; });
  }
  void open_low() { open(&State::low_open); }
  void open_top() { open(&State::top_open); }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    int entered = 0;
    bool low_open = false, top_open = false;
  };
  void open(bool State::*gate) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    (*state_).*gate = true;
    state_->cv.notify_all();
  }
  std::shared_ptr<State> state_;
};

// Two requests of the lower level, started one at a time so that each ordinary stream holds one.
std::vector<InferRequest> hold_both_streams(CompiledModel& compiled, EntryGates& gates) {
  std::vector<InferRequest> low(2);
  for (unsigned i = 0; i < 2; ++i) {
    low[i] = compiled.create_infer_request();
    low[i].set_tensor("x", sample(i));
    low[i].start_async();
    EXPECT_TRUE(gates.wait_entered(static_cast<int>(i) + 1));
  }
  return low;
}

InferRequest start_top_level_request(CompiledModel& compiled) {
  InferRequest high = compiled.create_infer_request();
  high.set_tensor("x", sample(7));
  high.set_priority(1);
  high.start_async();
  return high;
}

void expect_outputs(Core& core, InferRequest& high, std::vector<InferRequest>& low) {
  Reference reference(core);
  reference.expect_output_of(7, high.get_tensor("y"));
  for (unsigned i = 0; i < low.size(); ++i) reference.expect_output_of(i, low[i].get_tensor("y"));
}

int completed(std::vector<InferRequest>& requests) {
  int done = 0;
  for (auto& r : requests) done += r.wait_for(std::chrono::milliseconds(0)) ? 1 : 0;
  return done;
}

}  // namespace

// With top_priority_stream, a request of the top level runs while every ordinary stream is held
// by a lower one; without it, it waits for one of them.
TEST(DynamicBatching, TheTopLevelsOwnStreamRunsItWhileTheOthersAreBusy) {
  for (const bool top_stream : {true, false}) {
    SCOPED_TRACE(top_stream ? "top_priority_stream" : "without");
    Core core;
    auto compiled = two_priority_streams(core, top_stream);
    EXPECT_EQ(compiled.get_property("top_priority_stream").as_bool(), top_stream);
    std::vector<InferRequest> low;
    InferRequest high;
    {
      EntryGates gates(compiled, false);
      low = hold_both_streams(compiled, gates);
      high = start_top_level_request(compiled);
      EXPECT_EQ(high.wait_for(std::chrono::milliseconds(top_stream ? 10'000 : 300)), top_stream);
    }
    high.wait();
    for (auto& r : low) r.wait();
    expect_outputs(core, high, low);
    set_stage_hook(compiled, nullptr);
    try {
      compiled.set_property({{"top_priority_stream", !top_stream}});
      ADD_FAILURE() << "top_priority_stream changed on a compiled model";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr("fixed at compilation"));
    }
  }
}

// While a run on the top level's stream is in progress, one ordinary stream holds at its next
// node boundary and the other goes on: of two lower requests let go meanwhile, one completes.
TEST(DynamicBatching, WhileTheTopLevelsStreamRunsOneOrdinaryStreamGivesWay) {
  Core core;
  auto compiled = two_priority_streams(core, true);
  std::vector<InferRequest> low;
  InferRequest high;
  {
    EntryGates gates(compiled, true);
    low = hold_both_streams(compiled, gates);
    high = start_top_level_request(compiled);
    ASSERT_TRUE(gates.wait_entered(3));  // on the top level's stream, its run begun
    gates.open_low();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (completed(low) < 1 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(completed(low), 1)
        << "the stream that gives way ran while the top level's run was in progress";
  }
  high.wait();
  for (auto& r : low) r.wait();
  expect_outputs(core, high, low);
  set_stage_hook(compiled, nullptr);
}

TEST(DynamicBatching, AgingSetLiveEndsTheStarvationOfALowRequestUnderSteadyHighLoad) {
  Core core;
  auto compiled = core.compile_model(
      make_linear_model(), "CPU",
      {{"priority_levels", 2}, {"default_priority_level", 2}, {props::num_streams, 1}});
  // Each run holds the one stream for 2 ms, so the high-priority load below (16 in flight,
  // restarted as they end) always has requests waiting when the scheduler picks the next one.
  set_stage_hook(compiled, [](detail::Stage stage, uint64_t) {
    if (stage == detail::Stage::execute) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  });
  std::atomic<bool> stop{false};
  std::atomic<int> high_done{0};
  std::thread load([&] {
    std::vector<InferRequest> high(16);
    for (size_t i = 0; i < high.size(); ++i) {
      high[i] = compiled.create_infer_request();
      high[i].set_tensor("x", sample(static_cast<unsigned>(100 + i)));
      high[i].set_priority(1);
      high[i].start_async();
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!stop && std::chrono::steady_clock::now() < deadline)
      for (auto& r : high) {
        r.wait();
        ++high_done;
        r.start_async();
      }
    for (auto& r : high) r.wait();
  });
  while (high_done < 20) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  InferRequest low = compiled.create_infer_request();
  low.set_tensor("x", sample(7));
  low.start_async();
  // Strict priorities (the default, as Triton's): it waits as long as level 1 has work.
  EXPECT_FALSE(low.wait_for(std::chrono::milliseconds(300)));
  // Aging, set while it waits: it has waited > 20 ms, so at the next decision it competes at
  // level 1 as the oldest there, and runs while the load goes on.
  compiled.set_property({{"priority_aging_microseconds", 20000}});
  EXPECT_EQ(compiled.get_property("priority_aging_microseconds").as_int(), 20000);
  const bool ran = low.wait_for(std::chrono::seconds(5));
  stop = true;
  load.join();
  ASSERT_TRUE(ran);
  Reference(core).expect_output_of(7, low.get_tensor("y"));
}

TEST(DynamicBatching, AFullQueueRefusesAtOnceWithQueueFull) {
  Core core;
  auto compiled = core.compile_model(make_linear_model(), "CPU",
                                     {{"max_queue_size", 2}, {props::num_streams, 1}});
  ExecuteGate gate(compiled);
  std::vector<InferRequest> requests(4);
  for (int i = 0; i < 4; ++i) {
    requests[i] = compiled.create_infer_request();
    requests[i].set_tensor("x", sample(static_cast<unsigned>(i)));
  }
  // One in the stages (the stream's credit), two in the queue, the fourth refused while execute
  // is held.
  for (int i = 0; i < 3; ++i) requests[i].start_async();
  ASSERT_TRUE(gate.wait_executing(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  requests[3].start_async();
  try {
    // wait_for rethrows the request's error once it completed: refused while execute is held.
    requests[3].wait_for(std::chrono::seconds(5));
    ADD_FAILURE() << "a fourth request was queued";
  } catch (const QueueFull& e) {
    EXPECT_THAT(e.what(), HasSubstr("max_queue_size 2"));
  }
  gate.open();
  for (int i = 0; i < 3; ++i) requests[i].wait();
  requests[3].infer();  // room again
}

TEST(DynamicBatching, ARejectTimeoutFailsTheRequestBeforeItEverRuns) {
  Core core;
  auto compiled = core.compile_model(make_linear_model(), "CPU",
                                     {{"default_timeout_microseconds", 30'000},
                                      {"timeout_action", "REJECT"},
                                      {props::num_streams, 1}});
  ExecuteGate gate(compiled);
  std::vector<InferRequest> requests(5);
  for (int i = 0; i < 5; ++i) {
    requests[i] = compiled.create_infer_request();
    requests[i].set_tensor("x", sample(static_cast<unsigned>(i)));
    requests[i].start_async();
  }
  // The four behind the stream's one credit time out while execute is held.
  for (int i = 1; i < 5; ++i)  // wait_for rethrows the error of a completed request
    EXPECT_THROW(requests[i].wait_for(std::chrono::seconds(5)), RequestTimeout);
  gate.open();
  requests[0].wait();
  EXPECT_EQ(gate.executed().size(), 1u) << "a timed-out request reached execute";
  EXPECT_EQ(compiled.counters().failure, 4u);
}

TEST(DynamicBatching, ADelayTimeoutKeepsTheRequestAndRunsItAfterTheOthers) {
  Core core;
  auto compiled = core.compile_model(
      make_linear_model(), "CPU",
      {{"timeout_action", "DELAY"}, {"allow_timeout_override", true}, {props::num_streams, 1}});
  ExecuteGate gate(compiled);
  CompletionLog log;
  std::vector<InferRequest> requests(4);
  for (int i = 0; i < 4; ++i) {
    requests[i] = compiled.create_infer_request();
    requests[i].set_tensor("x", sample(static_cast<unsigned>(i)));
  }
  log.start(requests[0], 0);  // held at execute
  log.start(requests[1], 1);
  requests[2].set_timeout(std::chrono::microseconds(10'000));
  log.start(requests[2], 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // 2 is past its timeout
  log.start(requests[3], 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  gate.open();
  for (auto& r : requests) r.wait();  // nobody fails with DELAY
  EXPECT_LT(log.position(3), log.position(2));
}

TEST(DynamicBatching, PreserveOrderingDeliversInSubmissionOrderAcrossStreams) {
  Core core;
  auto compiled = core.compile_model(make_linear_model(), "CPU",
                                     {{"preserve_ordering", true},
                                      {props::num_streams, 2},
                                      {props::performance_mode, "THROUGHPUT"}});
  // Every third request is slow, so later ones on the other stream finish first.
  set_stage_hook(compiled, [](detail::Stage stage, uint64_t id) {
    if (stage == detail::Stage::execute && id % 3 == 1)
      std::this_thread::sleep_for(std::chrono::milliseconds(15));
  });
  CompletionLog log;
  std::vector<InferRequest> requests(24);
  for (int i = 0; i < 24; ++i) {
    requests[i] = compiled.create_infer_request();
    requests[i].set_tensor("x", sample(static_cast<unsigned>(i)));
    log.start(requests[i], i);
  }
  for (auto& r : requests) r.wait();
  std::vector<int> expected(24);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(log.order(), expected);
  set_stage_hook(compiled, nullptr);
}

TEST(DynamicBatching, TheActorMessageCarriesPriorityAndTimeout) {
  Core core;
  auto compiled = core.compile_model(make_linear_model(), "CPU", {{"priority_levels", 2}});
  model_actor model = as_actor(compiled);
  caf::scoped_actor self{actor_system_of(core)};
  self->request(model, caf::infinite, infer_atom::value, NamedTensors{{"x", sample(1)}}, int64_t{1},
                int64_t{0})
      .receive([](NamedTensors& out) { EXPECT_EQ(out.count("y"), 1u); },
               [](caf::error& e) { ADD_FAILURE() << to_string(e); });
  self->request(model, caf::infinite, infer_atom::value, NamedTensors{{"x", sample(1)}}, int64_t{3},
                int64_t{0})
      .receive([](NamedTensors&) { ADD_FAILURE() << "priority 3 of 2 accepted"; },
               [](caf::error& e) {
                 EXPECT_EQ(e.code(), static_cast<uint8_t>(ActorErrc::invalid_input));
               });
}

TEST(DynamicBatching, SetPropertyChecksEveryKeyBeforeApplyingAny) {
  Core core;
  auto compiled = core.compile_model(make_linear_model(), "CPU", {{"max_batch_size", 8}});
  compiled.set_property({{"max_batch_size", 4}, {"max_queue_delay_microseconds", 100}});
  EXPECT_EQ(compiled.get_property("max_batch_size").as_int(), 4);
  EXPECT_EQ(compiled.get_property(props::auto_batch_max_size).as_int(), 4);
  auto refused = [&](const AnyMap& props, const char* words) {
    try {
      compiled.set_property(props);
      ADD_FAILURE() << words;
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr(words));
    }
  };
  refused({{"max_batch_size", 16}}, "compiled for (8");
  refused({{props::enable_profiling, true}}, "fixed at compilation");
  refused({{"max_queue_delay_microseconds", 5}, {props::num_streams, 99}}, "compile with more");
  refused({{"preserve_ordering", true}}, "preserve_ordering");
  refused({{"max_queue_delay_microseconds", 5}, {"timeout_action", "NEVER"}}, "REJECT, DELAY");
  EXPECT_EQ(compiled.get_property("max_queue_delay_microseconds").as_int(), 100);  // none applied
  EXPECT_THROW(compiled.set_property({{"NO_SUCH_KEY", 1}}), UnknownProperty);
  // A model that cannot batch was compiled for one request per run.
  ModelBuilder b("static");
  auto x = b.input("x", ElementType::f32, {1, features});
  b.output(b.op("Relu", {x}), "y");
  auto fixed = core.compile_model(b.build(), "CPU", {{"max_batch_size", 8}});
  EXPECT_EQ(fixed.get_property("max_batch_size").as_int(), 1);
  EXPECT_THROW(fixed.set_property({{"max_batch_size", 2}}), InvalidArgument);
}

namespace {

void many_threads_with_random_priorities_and_timeouts(bool top_priority_stream) {
  Core core;
  Reference reference(core);
  auto compiled = core.compile_model(make_linear_model(), "CPU",
                                     {{"max_batch_size", 8},
                                      {"max_queue_delay_microseconds", 500},
                                      {"priority_levels", 3},
                                      {"max_queue_size", 40},
                                      {"allow_timeout_override", true},
                                      {"top_priority_stream", top_priority_stream},
                                      {props::num_streams, 2},
                                      {props::performance_mode, "THROUGHPUT"}});
  constexpr int threads = 8, per_thread = 60;
  std::atomic<int> ok{0}, timed_out{0}, refused{0}, other{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<InferRequest> requests(4);
      std::vector<unsigned> seeds(4);
      std::vector<std::atomic<int>> calls(4);
      for (auto& r : requests) r = compiled.create_infer_request();
      for (int i = 0; i < per_thread; i += 4) {
        for (size_t k = 0; k < 4; ++k) {
          calls[k] = 0;
          seeds[k] = static_cast<unsigned>(t * 1000 + i + static_cast<int>(k));
          requests[k].set_tensor("x", sample(seeds[k]));
          requests[k].set_priority(static_cast<int64_t>(rng() % 4));  // 0 = default
          requests[k].set_timeout(std::chrono::microseconds(rng() % 2 ? 0 : 200 + rng() % 5000));
          requests[k].set_callback([&calls, k](std::exception_ptr) { ++calls[k]; });
          requests[k].start_async();
        }
        for (size_t k = 0; k < 4; ++k) {
          try {
            requests[k].wait();
            reference.expect_output_of(seeds[k], requests[k].get_tensor("y"));
            ++ok;
          } catch (const RequestTimeout&) {
            ++timed_out;
          } catch (const QueueFull&) {
            ++refused;
          } catch (...) {
            ++other;
          }
          // The callback runs right after wait() returns; give it that moment.
          for (int spin = 0; spin < 1000 && calls[k] == 0; ++spin)
            std::this_thread::sleep_for(std::chrono::microseconds(100));
          EXPECT_EQ(calls[k].load(), 1);
        }
      }
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(ok + timed_out + refused, threads * per_thread);
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(ok.load(), threads * per_thread / 2);
  const PipelineCounters c = compiled.counters();
  EXPECT_EQ(c.success + c.failure, static_cast<uint64_t>(threads * per_thread));
}

}  // namespace

TEST(DynamicBatching, ManyThreadsWithRandomPrioritiesAndTimeoutsEachCompleteOnce) {
  many_threads_with_random_priorities_and_timeouts(false);
}

TEST(DynamicBatching, ManyThreadsWithRandomPrioritiesAndTheTopLevelsStreamEachCompleteOnce) {
  many_threads_with_random_priorities_and_timeouts(true);
}

TEST(DynamicBatching, ReconfiguringUnderLoadDropsFailsAndLosesNothing) {
  Core core;
  Reference reference(core);
  auto compiled = core.compile_model(
      make_linear_model(), "CPU",
      {{"max_batch_size", 8}, {props::num_streams, 2}, {props::performance_mode, "THROUGHPUT"}});
  std::atomic<bool> done{false};
  std::atomic<int> ok{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t)
    pool.emplace_back([&, t] {
      std::vector<InferRequest> requests(8);
      for (auto& r : requests) r = compiled.create_infer_request();
      for (int i = 0; i < 200; i += 8) {
        for (int k = 0; k < 8; ++k) {
          requests[k].set_tensor("x", sample(static_cast<unsigned>(t * 1000 + i + k)));
          requests[k].set_priority(k % 2 ? 1 : 0);
          requests[k].start_async();
        }
        for (int k = 0; k < 8; ++k) {
          requests[k].wait();  // throws, failing the test, if a request was lost or failed
          reference.expect_output_of(static_cast<unsigned>(t * 1000 + i + k),
                                     requests[k].get_tensor("y"));
          ++ok;
        }
      }
    });
  std::thread changer([&] {
    for (int round = 0; !done && round < 2000; ++round) {
      const bool batching = round % 3 != 0;
      compiled.set_property({{"max_batch_size", batching ? 8 : 1},
                             {"max_queue_delay_microseconds", round % 2 ? 0 : 300},
                             {"priority_levels", round % 4 < 2 ? 0 : 2},
                             {"preferred_batch_size", batching && round % 5 == 0 ? "4" : ""},
                             {props::num_streams, round % 7 < 3 ? 1 : 2}});
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  for (auto& th : pool) th.join();
  done = true;
  changer.join();
  EXPECT_EQ(ok.load(), 4 * 200);
}

// The execute streams that ran the requests completed since the statistics were last reset.
std::set<int> streams_used(CompiledModel& compiled) {
  std::set<int> used;
  for (const auto& trace : compiled.impl()->context().stats.traces())
    used.insert(trace.stages[static_cast<size_t>(detail::Stage::execute)].worker);
  return used;
}

// Runs `n` requests, 8 at a time, each checked against the reference.
void run_checked(CompiledModel& compiled, Reference& reference, int n) {
  std::vector<InferRequest> requests(8);
  for (auto& r : requests) r = compiled.create_infer_request();
  for (int i = 0; i < n; i += 8) {
    for (int k = 0; k < 8; ++k) {
      requests[k].set_tensor("x", sample(static_cast<unsigned>(i + k)));
      requests[k].start_async();
    }
    for (int k = 0; k < 8; ++k) {
      requests[k].wait();
      reference.expect_output_of(static_cast<unsigned>(i + k), requests[k].get_tensor("y"));
    }
  }
}

TEST(LiveStreams, NumStreamsChangesWhichStreamsTakeNewWorkWithinTheCompiledCount) {
  Core core;
  Reference reference(core);
  for (bool batching : {false, true}) {  // a credit per request (FIFO) or per stream (batching)
    AnyMap config = {{props::num_streams, 2}, {props::performance_mode, "THROUGHPUT"}};
    if (batching) config["max_batch_size"] = 4;
    auto compiled = core.compile_model(make_linear_model(), "CPU", config);
    for (const Any& bad : {Any(0), Any(3), Any(std::string("two"))}) {
      try {
        compiled.set_property({{props::num_streams, bad}});
        ADD_FAILURE() << "accepted NUM_STREAMS " << bad.as_string();
      } catch (const InvalidArgument& e) {
        EXPECT_THAT(e.what(), HasSubstr(props::num_streams));
        EXPECT_THAT(e.what(), HasSubstr("allowed: 1..2"));
      }
    }
    run_checked(compiled, reference, 96);
    EXPECT_EQ(streams_used(compiled), (std::set<int>{0, 1}));

    compiled.set_property({{props::num_streams, 1}});
    EXPECT_EQ(compiled.get_property(props::num_streams).as_int(), 1);
    run_checked(compiled, reference, 8);  // the change has reached the actors
    compiled.impl()->context().stats.reset();
    run_checked(compiled, reference, 96);
    EXPECT_EQ(streams_used(compiled), std::set<int>{0}) << "batching " << batching;

    compiled.set_property({{props::num_streams, 2}});
    EXPECT_EQ(compiled.get_property(props::num_streams).as_int(), 2);
    run_checked(compiled, reference, 8);
    compiled.impl()->context().stats.reset();
    run_checked(compiled, reference, 96);
    EXPECT_EQ(streams_used(compiled), (std::set<int>{0, 1})) << "batching " << batching;
  }
}

TEST(DynamicBatching, DestroyingTheModelWhileRequestsWaitForABatchCompletesEachOnce) {
  std::atomic<int> callbacks{0}, cancelled{0};
  constexpr int n = 30;
  {
    Core core;
    auto compiled = core.compile_model(make_linear_model(), "CPU",
                                       {{"max_batch_size", 64},
                                        {"max_queue_delay_microseconds", 10'000'000},
                                        {"adaptive_batch_size", false},
                                        {props::num_streams, 1}});
    std::vector<InferRequest> requests;
    for (int i = 0; i < n; ++i) {
      requests.push_back(compiled.create_infer_request());
      requests.back().set_tensor("x", sample(static_cast<unsigned>(i)));
      requests.back().set_callback([&](std::exception_ptr e) {
        ++callbacks;
        if (e) ++cancelled;
      });
    }
    for (auto& request : requests) request.start_async();
  }
  EXPECT_EQ(callbacks.load(), n);
  EXPECT_EQ(cancelled.load(), n);  // all were still waiting for the 10 s delay
}

TEST(DynamicBatching, CancellingAWaitingRequestCompletesItAtOnce) {
  Core core;
  auto compiled = core.compile_model(make_linear_model(), "CPU",
                                     {{"max_batch_size", 8},
                                      {"max_queue_delay_microseconds", 10'000'000},
                                      {"adaptive_batch_size", false},
                                      {props::num_streams, 1}});
  std::vector<InferRequest> requests(3);
  for (unsigned i = 0; i < 3; ++i) {
    requests[i] = compiled.create_infer_request();
    requests[i].set_tensor("x", sample(i));
    requests[i].start_async();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto t0 = std::chrono::steady_clock::now();
  requests[1].cancel();
  EXPECT_THROW(requests[1].wait_for(std::chrono::seconds(5)), Cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3))
      << "the cancel waited for the 10 s batch delay";
  // The others still wait for their batch; they are cancelled when the model goes.
  EXPECT_FALSE(requests[0].wait_for(std::chrono::milliseconds(0)));
}
