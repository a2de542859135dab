// The compiled model as a typed CAF actor.

#include <gmock/gmock.h>

#include "pipeline_fixture.hpp"
#include "troupe/actor_interface.hpp"

using namespace troupe;
using namespace troupe::test;
using ::testing::HasSubstr;

TEST(ActorInterface, InferMessageRepliesWithOutputs) {
  Core core;
  auto compiled = core.compile_model(make_add_relu_model(), "CPU", {{props::num_streams, 2}});
  model_actor model = as_actor(compiled);
  caf::scoped_actor self{actor_system_of(core)};
  for (int i = 0; i < 10; ++i) {
    Tensor in = make_input(static_cast<float>(i));
    self->request(model, caf::infinite, infer_atom::value, NamedTensors{{"x", in}})
        .receive([&](NamedTensors& out) { expect_add_relu_output(in, out.at("y")); },
                 [&](caf::error& err) { FAIL() << actor_system_of(core).render(err); });
  }
}

namespace {

// A client actor that keeps `window` requests outstanding until `total` have been answered.
struct Client {
  model_actor model;
  std::vector<Tensor> inputs;
  size_t window;
  std::atomic<int>* ok;
  std::atomic<int>* full;
  std::atomic<int>* bad;
};

void send_next(caf::event_based_actor* self, std::shared_ptr<Client> c,
               std::shared_ptr<size_t> next) {
  if (*next >= c->inputs.size()) return;
  const size_t i = (*next)++;
  self->request(c->model, caf::infinite, infer_atom::value, NamedTensors{{"x", c->inputs[i]}})
      .then(
          [self, c, next, i](NamedTensors& out) {
            auto y = out.at("y").to_vector<float>();
            auto x = c->inputs[i].to_vector<float>();
            bool match = y.size() == x.size();
            for (size_t k = 0; match && k < x.size(); ++k) match = y[k] == expected_add_relu(x[k]);
            match ? ++*c->ok : ++*c->bad;
            send_next(self, c, next);
          },
          [self, c, next](caf::error& err) {
            err.code() == static_cast<uint8_t>(ActorErrc::pipeline_full) ? ++*c->full : ++*c->bad;
            send_next(self, c, next);
          });
}

}  // namespace

TEST(ActorInterface, ManyConcurrentRequestsFromAnActor) {
  Core core;
  auto compiled = core.compile_model(make_add_relu_model(), "CPU",
                                     {{props::num_streams, 2}, {props::max_requests_in_flight, 8}});
  auto& sys = actor_system_of(core);
  for (size_t window : {size_t{16}, size_t{1000}}) {
    constexpr int n = 400;
    std::atomic<int> ok{0}, full{0}, bad{0};
    auto c = std::make_shared<Client>(Client{as_actor(compiled), {}, window, &ok, &full, &bad});
    for (int i = 0; i < n; ++i) c->inputs.push_back(make_input(static_cast<float>(i)));
    caf::scoped_actor self{sys};
    auto client = sys.spawn([c](caf::event_based_actor* client_self) {
      auto next = std::make_shared<size_t>(0);
      for (size_t k = 0; k < c->window; ++k) send_next(client_self, c, next);
    });
    self->wait_for(client);
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(ok + full, n);  // every request answered exactly once
    if (window == 16) {
      EXPECT_EQ(ok.load(), n);  // within the bound: nothing refused
    } else {
      EXPECT_GT(full.load(), 0);  // a flood beyond 4 x MAX_REQUESTS_IN_FLIGHT is refused...
      EXPECT_GE(ok.load(), 32);   // ...after the bounded queue is used
    }
  }
}

TEST(ActorInterface, BadInputsGetTypedErrors) {
  Core core;
  auto compiled = core.compile_model(make_add_relu_model());
  model_actor model = as_actor(compiled);
  auto& sys = actor_system_of(core);
  caf::scoped_actor self{sys};
  auto expect_error = [&](NamedTensors inputs, ActorErrc code, const std::string& fragment) {
    self->request(model, caf::infinite, infer_atom::value, std::move(inputs))
        .receive([&](NamedTensors&) { FAIL() << "expected an error"; },
                 [&](caf::error& err) {
                   EXPECT_EQ(err.category(), troupe_error_category);
                   EXPECT_EQ(err.code(), static_cast<uint8_t>(code));
                   EXPECT_THAT(sys.render(err), HasSubstr(fragment));
                 });
  };
  expect_error({{"nope", make_input(0.f)}}, ActorErrc::invalid_input, "nope");
  expect_error({}, ActorErrc::invalid_input, "'x' is missing");
  expect_error({{"x", Tensor(ElementType::f32, {2, 2})}}, ActorErrc::invalid_input, "[2,2]");
  // And it still works afterwards.
  self->request(model, caf::infinite, infer_atom::value, NamedTensors{{"x", make_input(0.f)}})
      .receive([](NamedTensors& out) { EXPECT_EQ(out.size(), 1u); }, [](caf::error&) { FAIL(); });
}
