// Kernel failures, shutdown with requests in flight and destruction from inside a callback.

#include <gmock/gmock.h>

#include "pipeline_fixture.hpp"

using namespace troupe;
using namespace troupe::test;
using ::testing::HasSubstr;

namespace {

// A test-only op: identity that throws when the first element is negative.
void register_fail_if_negative() {
  register_checked_identity("TestFailIfNegative", [](const Node& node, const Tensor& x) {
    if (x.value_at(0) < 0) throw ExecutionError("node '" + node.name + "': negative input");
  });
}

std::shared_ptr<Model> make_failing_model() {
  register_fail_if_negative();
  ModelBuilder b("failing");
  auto x = b.input("x", ElementType::f32, {1, 4});
  b.output(b.op("TestFailIfNegative", {x}, {}, "checker"), "y");
  return b.build();
}

}  // namespace

TEST(Failures, KernelExceptionFailsOnlyThatRequest) {
  Core core;
  auto compiled = core.compile_model(make_failing_model(), "CPU", {{props::num_streams, 2}});
  constexpr int n = 100;
  std::vector<InferRequest> requests;
  std::atomic<int> callback_errors{0};
  for (int i = 0; i < n; ++i) {
    requests.push_back(compiled.create_infer_request());
    const float first = i % 4 == 0 ? -1.f : static_cast<float>(i);
    requests.back().set_tensor("x", Tensor::from_vector<float>({1, 4}, {first, 1, 2, 3}));
    requests.back().set_callback([&](std::exception_ptr e) {
      if (e) ++callback_errors;
    });
    requests.back().start_async();
  }
  for (int i = 0; i < n; ++i) {
    if (i % 4 == 0) {
      std::string msg = error_of<ExecutionError>([&] { requests[i].wait(); });
      EXPECT_THAT(msg, HasSubstr("checker"));
    } else {
      requests[i].wait();
      EXPECT_EQ(requests[i].get_tensor("y").value_at(0), static_cast<double>(i));
    }
  }
  EXPECT_EQ(callback_errors.load(), n / 4);
}

TEST(Shutdown, DestroyingTheModelFinishesOrCancelsEveryRequest) {
  constexpr int n = 60;
  Outcomes outcomes;
  {
    Core core;
    auto compiled =
        core.compile_model(make_add_relu_model(), "CPU", {{props::max_requests_in_flight, 4}});
    set_stage_hook(compiled, [](detail::Stage stage, uint64_t) {
      if (stage == detail::Stage::execute)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    });
    std::vector<InferRequest> requests;
    for (int i = 0; i < n; ++i) {
      requests.push_back(compiled.create_infer_request());
      requests.back().set_tensor("x", make_input(static_cast<float>(i)));
      requests.back().set_callback([&](std::exception_ptr e) { outcomes.record(e); });
      requests.back().start_async();
    }
    // Everything (requests, model, core) goes out of scope with most requests still queued.
  }
  EXPECT_EQ(outcomes.succeeded + outcomes.cancelled, n);
  EXPECT_EQ(outcomes.other.load(), 0);
  EXPECT_GT(outcomes.cancelled.load(), 0);
  EXPECT_GT(outcomes.succeeded.load(), 0);
}

TEST(Shutdown, LastReferenceDroppedInsideACallback) {
  std::atomic<int> done{0};
  {
    Core core;
    auto compiled = std::make_shared<CompiledModel>(core.compile_model(make_add_relu_model()));
    auto holder = std::make_shared<std::shared_ptr<CompiledModel>>(compiled);
    compiled.reset();
    std::vector<InferRequest> requests;
    for (int i = 0; i < 8; ++i) requests.push_back((*holder)->create_infer_request());
    std::mutex mutex;
    for (auto& r : requests) {
      r.set_callback([&, holder](std::exception_ptr) {
        ++done;
        std::lock_guard<std::mutex> lock(mutex);
        holder->reset();  // drops the CompiledModel from inside the callback
      });
      r.start_async();
    }
    for (auto& r : requests) {
      try {
        r.wait();
      } catch (const Cancelled&) {
      }
    }
    requests.clear();  // the last references go here or in a callback
  }
  EXPECT_EQ(done.load(), 8);
}

TEST(Shutdown, RepeatedCreateAndDestroyDoesNotHang) {
  Core core;
  for (int i = 0; i < 30; ++i) {
    auto compiled = core.compile_model(make_add_relu_model(), "CPU", {{props::num_streams, 2}});
    auto r = compiled.create_infer_request();
    r.set_tensor("x", make_input(1.f));
    r.start_async();
    if (i % 2) r.wait();
  }
}
