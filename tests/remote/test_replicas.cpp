// A model served by several replicas: least-outstanding routing, a replica lost under load
// (its requests retried once elsewhere, none lost, none answered twice), a silent replica timed
// out, and a replica that comes back used again.

#include <gmock/gmock.h>

#include "remote_fixture.hpp"

using namespace troupe;
using namespace troupe::test;
using ::testing::HasSubstr;

namespace {

int64_t property(const CompiledModel& model, const char* name) {
  return model.get_property(name).as_int();
}

// Waits (bounded) until `condition` holds.
template <class F>
bool eventually(F&& condition, std::chrono::seconds limit = std::chrono::seconds(15)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

uint64_t completed(const CompiledModel& model) {
  const PipelineCounters c = model.counters();
  return c.success + c.failure;
}

}  // namespace

TEST(Replicas, LoadSpreadsOverLocalAndRemoteReplicas) {
  ServingNode a, b;
  Core client(NodeOptions{});
  CompiledModel local = client.compile_model(make_add_relu_model());
  CompiledModel model = client.connect_replicas("add_relu", {a.endpoint(), b.endpoint()}, local);
  EXPECT_EQ(model.get_property(props::execution_devices).as_strings(),
            (std::vector<std::string>{"CPU", "CPU@" + a.endpoint(), "CPU@" + b.endpoint()}));
  EXPECT_EQ(run_checked(model, 3000, 12, 3), 0);
  // Every replica took a share.
  EXPECT_GT(local.counters().success, 100u);
  EXPECT_GT(a.model.counters().success, 100u);
  EXPECT_GT(b.model.counters().success, 100u);
  EXPECT_EQ(local.counters().success + a.model.counters().success + b.model.counters().success,
            3000u);
}

TEST(Replicas, AReplicaLostUnderLoadLosesNoRequest) {
  ServingNode a;
  auto b = std::make_unique<ServingNode>();
  Core client(NodeOptions{});
  CompiledModel model = client.connect_replicas("add_relu", {a.endpoint(), b->endpoint()});
  std::vector<std::string> errors;
  std::thread killer([&] {
    eventually([&] { return b->model.counters().success > 300; });
    b.reset();  // its node shuts down with requests queued and in flight
  });
  const int failed = run_checked(model, 6000, 16, 3, &errors);
  killer.join();
  EXPECT_EQ(failed, 0) << (errors.empty() ? "" : errors[0]);
  EXPECT_EQ(property(model, props::remote_replicas_lost), 1);
  EXPECT_EQ(property(model, props::remote_unavailable_requests), 0);
  // Each request completed exactly once on the client, whatever was retried.
  EXPECT_EQ(completed(model), 6000u);
  EXPECT_EQ(model.counters().success, 6000u);
}

TEST(Replicas, ASilentReplicaTimesOutAndItsRequestsGoElsewhere) {
  ServingNode a, b;
  // b's first requests stall far past the client's timeout; afterwards it is fast again.
  std::atomic<int> stalled{0};
  set_stage_hook(b.model, [&](detail::Stage stage, uint64_t) {
    if (stage == detail::Stage::execute && stalled++ < 2)
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  });
  Core client(NodeOptions{});
  CompiledModel model = client.connect_replicas("add_relu", {a.endpoint(), b.endpoint()}, {},
                                                {{props::remote_timeout_ms, 300}});
  std::vector<std::string> errors;
  EXPECT_EQ(run_checked(model, 400, 8, 2, &errors), 0) << (errors.empty() ? "" : errors[0]);
  EXPECT_GE(property(model, props::remote_replicas_lost), 1);
  EXPECT_GE(property(model, props::remote_retried_requests), 1);
  EXPECT_EQ(completed(model), 400u);
  // b still answers its port: once its stall is over it is found again and used.
  ASSERT_TRUE(eventually([&] { return stalled >= 2 && b.model.counters().success >= 2; }))
      << "stalled " << stalled << ", b completed " << b.model.counters().success << " + "
      << b.model.counters().failure << ", lost " << property(model, props::remote_replicas_lost)
      << ", reconnects " << property(model, props::remote_reconnects);
  ASSERT_TRUE(eventually([&] {
    return property(model, props::remote_reconnects) ==
           property(model, props::remote_replicas_lost);
  }));
  const uint64_t before = b.model.counters().success;
  EXPECT_EQ(run_checked(model, 400, 8, 2), 0);
  EXPECT_GT(b.model.counters().success, before);
}

TEST(Replicas, AReplicaThatComesBackIsUsedAgain) {
  ServingNode a;
  auto b = std::make_unique<ServingNode>();
  const uint16_t port = b->port;
  Core client(NodeOptions{});
  CompiledModel model = client.connect_replicas("add_relu", {a.endpoint(), b->endpoint()});
  EXPECT_EQ(run_checked(model, 200, 4, 1), 0);
  b.reset();
  EXPECT_EQ(run_checked(model, 200, 4, 1), 0);  // a alone
  ASSERT_TRUE(eventually([&] { return property(model, props::remote_replicas_lost) == 1; }));
  b = std::make_unique<ServingNode>(NodeOptions{}, port);  // a new node on the same port
  ASSERT_TRUE(eventually([&] { return property(model, props::remote_reconnects) == 1; }));
  EXPECT_EQ(run_checked(model, 1000, 8, 2), 0);
  EXPECT_GT(b->model.counters().success, 100u);
}

TEST(Replicas, WithEveryReplicaGoneRequestsFailFastAndTyped) {
  auto a = std::make_unique<ServingNode>();
  Core client(NodeOptions{});
  CompiledModel model = client.connect_replicas("add_relu", {a->endpoint()});
  a.reset();
  ASSERT_TRUE(eventually([&] { return property(model, props::remote_replicas_lost) == 1; }));
  InferRequest request = model.create_infer_request();
  request.set_tensor("x", make_input(1.f));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(error_of<RemoteUnavailable>([&] { request.infer(); }),
              HasSubstr("no replica of the model is reachable"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(Replicas, ReplicasMustAgreeOnInputsAndOutputs) {
  ServingNode a;
  Core other_node(NodeOptions{});
  auto other = other_node.compile_model(make_add_relu_model(1, 8));  // [1,8], not [1,16]
  const uint16_t port = other_node.publish({{"add_relu", other}});
  Core client(NodeOptions{});
  EXPECT_THAT(
      error_of<InvalidArgument>([&] {
        client.connect_replicas("add_relu", {a.endpoint(), "127.0.0.1:" + std::to_string(port)});
      }),
      HasSubstr("has other inputs or outputs"));
  EXPECT_THAT(
      error_of<InvalidArgument>([&] { client.connect_replicas("add_relu", {"127.0.0.1"}); }),
      HasSubstr("is not HOST:PORT"));
}
