// Embedding troupe in a CAF application: the compiled model is a typed actor. A client actor of
// our own sends it (infer_atom, NamedTensors) requests and gets the outputs, or an error, as the
// reply — no InferRequest involved. One request names a wrong input to show the error reply.
//
// Build: part of the normal build (build/bin/example_embed_actor). Run it without arguments.

#include <iomanip>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "troupe/actor_interface.hpp"
#include "troupe/core.hpp"
#include "troupe/model_builder.hpp"

namespace {

// scores = softmax(x . W + b): four features, three classes. W picks feature i for class i.
std::shared_ptr<troupe::Model> make_classifier() {
  troupe::ModelBuilder b("tiny_classifier");
  auto x = b.input("features", troupe::ElementType::f32, {1, 4});
  auto w = b.constant("W", troupe::Tensor::from_vector<float>({4, 3}, {1, 0, 0,  //
                                                                       0, 1, 0,  //
                                                                       0, 0, 1,  //
                                                                       0, 0, 0}));
  auto bias = b.constant("b", troupe::Tensor::from_vector<float>({1, 3}, {0, 0, 0}));
  auto logits = b.op("Add", {b.op("MatMul", {x, w}), bias});
  b.output(b.op("Softmax", {logits}, {{"axis", int64_t{1}}}), "scores");
  return b.build();
}

std::string format(const troupe::Tensor& t) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(4) << "[";
  for (int64_t i = 0; i < t.size(); ++i) os << (i ? ", " : "") << t.value_at(i);
  return os.str() + "]";
}

// The message troupe put into an error reply's context.
std::string error_message(const caf::error& err) {
  if (err.context().match_element<std::string>(0)) return err.context().get_as<std::string>(0);
  return "(no message)";
}

struct ClientState {
  int outstanding = 0;
};

// Sends every input at once (they run concurrently in the model's pipeline), prints each reply as
// it arrives and quits after the last one.
caf::behavior client(caf::stateful_actor<ClientState>* self, troupe::model_actor model,
                     std::vector<troupe::NamedTensors> requests) {
  auto done_one = [self] {
    if (--self->state.outstanding == 0) self->quit();
  };
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string sent = format(requests[i].begin()->second);
    const std::string input_name = requests[i].begin()->first;
    ++self->state.outstanding;
    self->request(model, caf::infinite, troupe::infer_atom::value, std::move(requests[i]))
        .then(
            [self, i, sent, done_one](const troupe::NamedTensors& outputs) {
              caf::aout(self) << "request " << i << ": features " << sent << " -> scores "
                              << format(outputs.at("scores")) << std::endl;
              done_one();
            },
            [self, i, input_name, done_one](const caf::error& err) {
              const bool ours = err.category() == troupe::troupe_error_category;
              caf::aout(self) << "request " << i << " (input '" << input_name << "') failed: "
                              << (ours && err.code() ==
                                              static_cast<uint8_t>(troupe::ActorErrc::invalid_input)
                                      ? "invalid_input"
                                      : self->system().render(err))
                              << ": " << error_message(err) << std::endl;
              done_one();
            });
  }
  return {};  // no messages of its own: the actor lives for its pending replies
}

}  // namespace

int main() {
  troupe::Core core;
  troupe::CompiledModel compiled = core.compile_model(make_classifier(), "CPU");
  troupe::model_actor model = troupe::as_actor(compiled);
  caf::actor_system& system = troupe::actor_system_of(core);

  std::vector<troupe::NamedTensors> requests;
  const std::vector<std::vector<float>> samples = {
      {2, 0, 0, 5}, {0, 2, 0, 5}, {0, 0, 2, 5}, {1, 1, 1, 5}};
  for (const auto& s : samples)
    requests.push_back({{"features", troupe::Tensor::from_vector<float>({1, 4}, s)}});
  // The model has no input called "pixels": the reply is an error naming the problem.
  requests.push_back({{"pixels", troupe::Tensor::from_vector<float>({1, 4}, {0, 0, 0, 0})}});

  auto me = system.spawn(client, model, std::move(requests));
  caf::scoped_actor self{system};
  self->wait_for(me);
  // `compiled` and `core` go out of scope here: the pipeline shuts its actors down, then the
  // actor system stops.
  return 0;
}
