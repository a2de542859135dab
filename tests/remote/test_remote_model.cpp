// A compiled model on another node used like a local one: Core::publish on one side,
// Core::connect_remote on the other, over the loopback middleman.

#include <gmock/gmock.h>

#include <atomic>

#include <caf/io/all.hpp>

#include "remote_fixture.hpp"

using namespace troupe;
using namespace troupe::test;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(RemoteModel, BehavesLikeTheLocalModel) {
  ServingNode server;
  Core client(NodeOptions{});
  CompiledModel remote = client.connect_remote("127.0.0.1", server.port, "add_relu");
  ASSERT_EQ(remote.inputs().size(), 1u);
  EXPECT_EQ(remote.inputs()[0].name, "x");
  EXPECT_EQ(remote.inputs()[0].shape, Shape({1, 16}));
  EXPECT_EQ(remote.outputs()[0].name, "y");
  EXPECT_EQ(remote.outputs()[0].type, ElementType::f32);
  EXPECT_EQ(remote.get_property(props::model_name).as_string(), "add_relu");
  EXPECT_EQ(remote.get_property(props::num_streams).as_int(), 2);  // the node's own setting
  EXPECT_EQ(remote.get_property(props::execution_devices).as_strings(),
            std::vector<std::string>{"CPU@" + server.endpoint()});
  EXPECT_GE(remote.get_property(props::optimal_number_of_infer_requests).as_int(), 2);

  InferRequest request = remote.create_infer_request();
  Tensor x = make_input(3.f);
  request.set_tensor("x", x);
  request.infer();
  expect_add_relu_output(x, request.get_tensor("y"));
  EXPECT_THAT(error_of<InvalidArgument>([&] { remote.export_model(std::cout); }),
              HasSubstr("is remote"));
}

TEST(RemoteModel, ManyRequestsInFlightFromSeveralThreadsEachGetTheirOwnResult) {
  ServingNode server;
  Core client(NodeOptions{});
  CompiledModel remote = client.connect_remote("127.0.0.1", server.port, "add_relu");
  std::vector<std::string> errors;
  EXPECT_EQ(run_checked(remote, 3000, 16, 4, &errors), 0) << (errors.empty() ? "" : errors[0]);
  const PipelineCounters counters = remote.counters();
  EXPECT_EQ(counters.success, 3000u);
  EXPECT_EQ(remote.get_property(props::remote_sent_requests).as_int(), 3000);
  // The remote round trip is the execute span: stamped on every request.
  InferRequest one = remote.create_infer_request();
  one.set_tensor("x", make_input(1.f));
  one.infer();
  bool execute_seen = false;
  for (const ProfilingInfo& p : one.profiling_info())
    if (p.name == std::string(stage_names[2])) {
      execute_seen = true;
      EXPECT_GT(p.real_time_us, 0);
    }
  EXPECT_TRUE(execute_seen);
}

TEST(RemoteModel, AsATypedActorOnTheClientNode) {
  ServingNode server;
  Core client(NodeOptions{});
  CompiledModel remote = client.connect_remote("127.0.0.1", server.port, "add_relu");
  // The remote model is itself a model actor here: CAF code on the client talks to it the same way.
  model_actor actor = as_actor(remote);
  caf::scoped_actor self{actor_system_of(client)};
  Tensor x = make_input(2.f);
  self->request(actor, std::chrono::seconds(10), infer_atom::value, NamedTensors{{"x", x}})
      .receive([&](NamedTensors& out) { expect_add_relu_output(x, out.at("y")); },
               [&](caf::error& e) { FAIL() << actor_system_of(client).render(e); });
}

TEST(RemoteModel, BadInputsGetTypedErrorsAndTheModelKeepsServing) {
  ServingNode server;
  Core client(NodeOptions{});
  CompiledModel remote = client.connect_remote("127.0.0.1", server.port, "add_relu");
  InferRequest request = remote.create_infer_request();
  EXPECT_THAT(error_of<TensorMismatch>([&] {
                request.set_tensor("x", Tensor(ElementType::f32, {1, 15}));
              }),
              HasSubstr("input 'x'"));
  // Straight to the node's actor, past the client's checks: the node refuses it by name.
  caf::scoped_actor self{actor_system_of(client)};
  model_actor node_actor;
  {
    auto directory =
        actor_system_of(client).middleman().remote_actor<model_directory>("127.0.0.1", server.port);
    ASSERT_TRUE(directory);
    self->request(*directory, std::chrono::seconds(10), lookup_atom::value, "add_relu")
        .receive([&](model_actor& a) { node_actor = a; }, [&](caf::error&) { FAIL(); });
  }
  std::string refused;
  self->request(node_actor, std::chrono::seconds(10), infer_atom::value,
                NamedTensors{{"x", Tensor(ElementType::f32, {2, 16})}})
      .receive([&](NamedTensors&) {},
               [&](caf::error& e) { refused = actor_system_of(client).render(e); });
  EXPECT_THAT(refused, HasSubstr("input 'x'"));
  request.set_tensor("x", make_input(1.f));
  request.infer();
  expect_add_relu_output(make_input(1.f), request.get_tensor("y"));
}

TEST(RemoteModel, UnknownModelsAndPropertiesAreNamed) {
  ServingNode server;
  Core client(NodeOptions{});
  EXPECT_THAT(
      error_of<InvalidArgument>([&] { client.connect_remote("127.0.0.1", server.port, "resnet"); }),
      AllOf(HasSubstr("no model named 'resnet'"), HasSubstr("'add_relu'")));
  EXPECT_THAT(error_of<UnknownProperty>([&] {
                client.connect_remote("127.0.0.1", server.port, "add_relu",
                                      {{props::inference_precision, "bf16"}});
              }),
              HasSubstr("INFERENCE_PRECISION_HINT"));
  EXPECT_THAT(error_of<InvalidArgument>([&] {
                client.connect_remote("127.0.0.1", server.port, "add_relu",
                                      {{props::callback_thread, "ELSEWHERE"}});
              }),
              AllOf(HasSubstr("CALLBACK_THREAD"), HasSubstr("COMPLETION, STAGE")));
  // The local pipeline in front of the replicas runs its callbacks where asked.
  auto remote = client.connect_remote("127.0.0.1", server.port, "add_relu",
                                      {{props::callback_thread, "stage"}});
  EXPECT_EQ(remote.get_property(props::callback_thread).as_string(), "STAGE");
  auto request = remote.create_infer_request();
  request.set_tensor("x", make_input(2.f));
  std::atomic<int> calls{0};
  request.set_callback([&](std::exception_ptr e) { calls += e ? 100 : 1; });
  request.start_async();
  request.wait();
  EXPECT_EQ(calls.load(), 1);
  expect_add_relu_output(make_input(2.f), request.get_tensor("y"));
}

TEST(RemoteModel, NothingLeavesLoopbackWithoutTls) {
  Core node(NodeOptions{});
  auto model = node.compile_model(make_add_relu_model());
  for (const char* host : {"0.0.0.0", "", "192.0.2.1", "::"})
    EXPECT_THAT(error_of<InvalidArgument>([&] {
                  node.publish({{"m", model}}, 0, host);
                }),
                HasSubstr("without TLS"))
        << host;
  EXPECT_THAT(error_of<InvalidArgument>([&] { node.connect_remote("192.0.2.1", 9, "m"); }),
              HasSubstr("without TLS"));
  // A Core made without NodeOptions has no network at all.
  Core local;
  EXPECT_THAT(error_of<InvalidArgument>([&] {
                local.publish({{"m", model}});
              }),
              HasSubstr("not networked"));
}

TEST(RemoteModel, AnUnreachableNodeIsATypedError) {
  uint16_t closed_port;
  {
    ServingNode gone;
    closed_port = gone.port;
  }
  Core client(NodeOptions{});
  EXPECT_THAT(error_of<RemoteUnavailable>(
                  [&] { client.connect_remote("127.0.0.1", closed_port, "add_relu"); }),
              HasSubstr("cannot reach a troupe node at 127.0.0.1:" + std::to_string(closed_port)));
}

TEST(RemoteModel, TheServingNodeShutsDownWithClientsConnected) {
  auto server = std::make_unique<ServingNode>();
  Core client(NodeOptions{});
  CompiledModel remote = client.connect_remote("127.0.0.1", server->port, "add_relu",
                                               {{props::remote_timeout_ms, 5000}});
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, unavailable{0}, other{0};
  std::thread load([&] {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!stop && std::chrono::steady_clock::now() < deadline) {
      InferRequest r = remote.create_infer_request();
      r.set_tensor("x", make_input(1.f));
      try {
        r.infer();
        ++ok;
      } catch (const RemoteUnavailable&) {
        ++unavailable;
      } catch (...) {
        ++other;
      }
      if (unavailable > 5) break;
    }
  });
  while (ok < 50) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  server.reset();  // the node goes away under load
  load.join();
  stop = true;
  EXPECT_GT(ok, 0);
  EXPECT_GT(unavailable, 0) << "requests after the loss must fail as RemoteUnavailable";
  EXPECT_EQ(other, 0);
  EXPECT_EQ(remote.get_property(props::remote_replicas_lost).as_int(), 1);
}
