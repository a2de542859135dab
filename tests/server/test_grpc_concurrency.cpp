// The gRPC front end under concurrent load: many clients' calls in flight at once each get
// exactly their own outputs, and shutdown answers every call it accepted.

#include <gmock/gmock.h>

#include <condition_variable>
#include <mutex>

#include "../actors/pipeline_fixture.hpp"
#include "grpc_test_server.hpp"

using namespace troupe;
using namespace troupe::test::grpc_server;

namespace {

// One asynchronous ModelInfer and what it needs until its callback runs.
struct AsyncCall {
  Tensor x;
  std::string id;
  inference::ModelInferRequest request;
  inference::ModelInferResponse response;
  std::unique_ptr<grpc::ClientContext> context = bounded_context();
  grpc::Status status;
};

// Counts finished calls; waits for all of them for a bounded time.
class Completion {
 public:
  void done() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++finished_;
    changed_.notify_all();
  }
  bool wait_for(int count, std::chrono::seconds limit = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, limit, [&] { return finished_ >= count; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int finished_ = 0;
};

void start(inference::GRPCInferenceService::Stub& stub, AsyncCall& call, Completion& completion) {
  call.request = add_relu_request(call.x, call.id);
  stub.async()->ModelInfer(call.context.get(), &call.request, &call.response,
                           [&call, &completion](grpc::Status status) {
                             call.status = std::move(status);
                             completion.done();
                           });
}

}  // namespace

TEST(GrpcFrontendConcurrency, EveryConcurrentCallGetsItsOwnOutputs) {
  TestServer server;
  constexpr int threads = 16, calls_per_thread = 25;
  std::vector<std::vector<AsyncCall>> calls(threads);
  for (int t = 0; t < threads; ++t) {
    calls[t] = std::vector<AsyncCall>(calls_per_thread);
    for (int i = 0; i < calls_per_thread; ++i) {
      AsyncCall& call = calls[t][i];
      const auto seed = static_cast<unsigned>(t * calls_per_thread + i);
      call.x = troupe::test::random_tensor({1 + seed % 4, width}, seed, -3.f, 3.f);
      call.id = "t" + std::to_string(t) + "-c" + std::to_string(i);
    }
  }

  // Each thread has its own channel (its own connection) and all its calls in flight at once.
  std::vector<std::thread> clients;
  std::vector<Completion> completions(threads);
  for (int t = 0; t < threads; ++t)
    clients.emplace_back([&, t] {
      auto stub = server.make_stub(grpc::InsecureChannelCredentials());
      for (AsyncCall& call : calls[t]) start(*stub, call, completions[t]);
      completions[t].wait_for(calls_per_thread);
    });
  for (auto& client : clients) client.join();

  const auto model = server.model();
  for (int t = 0; t < threads; ++t)
    for (const AsyncCall& call : calls[t]) {
      ASSERT_TRUE(call.status.ok()) << call.id << ": " << call.status.error_message();
      EXPECT_EQ(call.response.id(), call.id);
      ASSERT_EQ(call.response.outputs_size(), 2) << call.id;
      const NamedTensors expected = infer_in_process(*model, {{"x", call.x}});
      EXPECT_TRUE(bit_equal(output_tensor(call.response, 0), expected.at("y"))) << call.id;
      EXPECT_TRUE(bit_equal(output_tensor(call.response, 1), expected.at("z"))) << call.id;
    }
  EXPECT_EQ(model->counters().success.load(), uint64_t{threads * calls_per_thread});
  EXPECT_EQ(model->pending(), 0);
}

TEST(GrpcFrontendConcurrency, ShutdownAnswersEveryCallInFlight) {
  TestServer server;
  const auto model = server.model();
  CompiledModel compiled = model->compiled();
  // A gate in the execute stage holds the calls in the pipeline until shutdown has begun (bounded,
  // so a failing test cannot hang).
  std::atomic<bool> open{false};
  troupe::test::set_stage_hook(compiled, [&open](detail::Stage stage, uint64_t) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (stage == detail::Stage::execute && !open && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  constexpr int n = 24;
  std::vector<AsyncCall> calls(n);
  Completion completion;
  for (int i = 0; i < n; ++i) {
    calls[i].x = troupe::test::random_tensor({1, width}, static_cast<unsigned>(100 + i));
    calls[i].id = std::to_string(i);
    start(*server.stub, calls[i], completion);
  }
  // Every call admitted (holding a ticket), none answered.
  ASSERT_TRUE(wait_until([&] { return model->pending() == n; })) << model->pending();

  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    server.frontend->shutdown();
    stopped = true;
  });
  // Shutdown refuses new calls at once but waits for the accepted ones.
  auto probe = server.make_stub(grpc::InsecureChannelCredentials());
  EXPECT_TRUE(wait_until([&] {
    inference::ServerLiveResponse live;
    return !probe->ServerLive(bounded_context(5).get(), {}, &live).ok();
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(stopped.load());
  EXPECT_EQ(model->pending(), n);

  open = true;
  stopper.join();
  EXPECT_TRUE(completion.wait_for(n, std::chrono::seconds(10)));
  for (const AsyncCall& call : calls) {
    ASSERT_TRUE(call.status.ok()) << call.id << ": " << call.status.error_message();
    EXPECT_EQ(call.response.id(), call.id);
    EXPECT_TRUE(bit_equal(output_tensor(call.response, 0),
                          infer_in_process(*model, {{"x", call.x}}).at("y")))
        << call.id;
  }
  server.frontend->shutdown();  // a second call returns at once

  inference::ServerLiveResponse live;
  const grpc::Status after = server.stub->ServerLive(bounded_context(5).get(), {}, &live);
  EXPECT_EQ(after.error_code(), grpc::StatusCode::UNAVAILABLE) << after.error_message();
  troupe::test::set_stage_hook(compiled, nullptr);
}
