// A compiled model on another node: one Core publishes it on an actor port, another uses it as a
// CompiledModel (InferRequest and all), and a plain CAF application talks to the same model actor
// through its own actor system. Both "nodes" live in this process for the example; across
// processes or machines the calls are the same (off loopback, with NodeOptions::tls set).
//
// Build: part of the normal build (build/bin/example_remote_node). Run it without arguments.
// Prints "remote scores [...]" (through InferRequest) and "actor scores [...]" (through CAF).

#include <iomanip>
#include <iostream>
#include <sstream>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "troupe/actor_interface.hpp"
#include "troupe/core.hpp"
#include "troupe/model_builder.hpp"

namespace {

// scores = softmax(features . W): W picks feature i for class i.
std::shared_ptr<troupe::Model> make_classifier() {
  troupe::ModelBuilder b("tiny_classifier");
  auto x = b.input("features", troupe::ElementType::f32, {1, 3});
  auto w = b.constant("W", troupe::Tensor::from_vector<float>({3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1}));
  b.output(b.op("Softmax", {b.op("MatMul", {x, w})}, {{"axis", int64_t{1}}}), "scores");
  return b.build();
}

std::string format(const troupe::Tensor& t) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(4) << "[";
  for (int64_t i = 0; i < t.size(); ++i) os << (i ? ", " : "") << t.value_at(i);
  return os.str() + "]";
}

}  // namespace

int main() {
  // The serving node: a networked Core publishes its models, by name, on one port.
  troupe::Core server(troupe::NodeOptions{});
  troupe::CompiledModel compiled = server.compile_model(make_classifier());
  const uint16_t port = server.publish({{"classifier", compiled}});  // a free loopback port

  // A client node: the remote model is a CompiledModel like any other.
  troupe::Core client(troupe::NodeOptions{});
  troupe::CompiledModel remote = client.connect_remote("127.0.0.1", port, "classifier");
  troupe::InferRequest request = remote.create_infer_request();
  request.set_tensor("features", troupe::Tensor::from_vector<float>({1, 3}, {3, 0, 0}));
  request.infer();
  std::cout << "remote scores " << format(request.get_tensor("scores")) << std::endl;

  // A CAF application with its own actor system, set up for troupe's messages and the network,
  // asks the node's directory for the model actor and sends it a request itself.
  caf::actor_system_config config;
  troupe::configure_actor_system(config);
  caf::actor_system system{config};
  auto directory = system.middleman().remote_actor<troupe::model_directory>("127.0.0.1", port);
  if (!directory) {
    std::cerr << "cannot reach the node: " << system.render(directory.error()) << "\n";
    return 1;
  }
  caf::scoped_actor self{system};
  int status = 1;
  self->request(*directory, std::chrono::seconds(10), troupe::lookup_atom::value,
                std::string("classifier"))
      .receive(
          [&](troupe::model_actor& model) {
            troupe::NamedTensors inputs{
                {"features", troupe::Tensor::from_vector<float>({1, 3}, {0, 0, 3})}};
            self->request(model, std::chrono::seconds(10), troupe::infer_atom::value, inputs)
                .receive(
                    [&](troupe::NamedTensors& outputs) {
                      std::cout << "actor scores " << format(outputs.at("scores")) << std::endl;
                      status = 0;
                    },
                    [&](caf::error& e) { std::cerr << system.render(e) << "\n"; });
          },
          [&](caf::error& e) { std::cerr << system.render(e) << "\n"; });
  return status;
}
