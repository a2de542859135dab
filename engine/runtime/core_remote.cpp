// Core across nodes: a networked Core, publishing models on an actor port, and compiled models
// backed by replicas on other nodes (and optionally one here). The remote CompiledModel is an
// ordinary pipeline whose router stage (actors/router_stage.cpp) stands in for execute.

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/model_directory.hpp"
#include "engine/graph/scheduling_policy.hpp"
#include "engine/runtime/compiled_model_impl.hpp"
#include "engine/runtime/cpu_plugin.hpp"
#include "engine/runtime/node.hpp"
#include "engine/runtime/runtime.hpp"
#include "troupe/actor_interface.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/properties.hpp"

namespace troupe {

namespace detail {

/// What a Core has published: the directory actors, their ports, and the models they serve
/// (kept alive here, on the owner's thread, not inside an actor).
struct Publications {
  caf::io::middleman_actor broker;  // the middleman's actor, or OpenSSL's with TLS
  std::vector<std::pair<model_directory, uint16_t>> directories;
  std::vector<CompiledModel> models;

  ~Publications() {
    for (auto& [directory, port] : directories) {
      caf::anon_send(broker, caf::unpublish_atom::value, directory.address(), port);
      caf::anon_send_exit(directory, caf::exit_reason::user_shutdown);
    }
  }
};

namespace {

std::string error_text(caf::actor_system& system, const caf::error& e) {
  if (e.category() == troupe_error_category && e.context().match_elements<std::string>())
    return e.context().get_as<std::string>(0);
  return system.render(e);
}

// One replica as the router starts with it, and what it said about the model.
struct Contact {
  actors::Replica replica;
  std::string description;  // JSON from describe_atom; empty when unreachable
  std::string error;
};

std::string describe(caf::actor_system& system, const model_actor& actor,
                     std::chrono::milliseconds timeout, const std::string& label) {
  caf::scoped_actor self{system};
  std::string description, failure;
  self->request(actor, timeout, describe_atom::value)
      .receive([&](std::string& d) { description = std::move(d); },
               [&](caf::error& e) { failure = error_text(system, e); });
  if (!failure.empty())
    throw RemoteUnavailable("replica " + label + " did not describe its model: " + failure);
  return description;
}

Contact reach(caf::actor_system& system, NodeLink& link, const std::string& endpoint,
              const std::string& model, std::chrono::milliseconds timeout) {
  Contact c;
  c.replica.endpoint = endpoint;
  c.replica.model = model;
  c.replica.label = endpoint;
  const auto [host, port] = parse_endpoint(endpoint);
  c.replica.host = host;
  c.replica.port = port;
  try {
    model_directory directory = link.connect(host, port);
    caf::scoped_actor self{system};
    std::string failure;
    bool unknown = false;
    self->request(directory, timeout, lookup_atom::value, model)
        .receive([&](model_actor& actor) { c.replica.actor = std::move(actor); },
                 [&](caf::error& e) {
                   unknown = e.category() == troupe_error_category &&
                             static_cast<ActorErrc>(e.code()) == ActorErrc::unknown_model;
                   failure = error_text(system, e);
                 });
    if (unknown) throw InvalidArgument("node " + endpoint + ": " + failure);
    if (!failure.empty()) throw RemoteUnavailable("node " + endpoint + ": " + failure);
    c.description = describe(system, c.replica.actor, timeout, endpoint);
  } catch (const RemoteUnavailable& e) {
    c.replica.actor = model_actor();
    c.error = e.what();
  }
  return c;
}

std::vector<ValueInfo> values_of(const nlohmann::json& list) {
  std::vector<ValueInfo> values;
  for (const auto& v : list) {
    ValueInfo info;
    info.name = v.at("name").get<std::string>();
    info.type = element_type_from_string(v.at("type").get<std::string>());
    info.shape = Shape(v.at("shape").get<std::vector<int64_t>>());
    values.push_back(std::move(info));
  }
  return values;
}

bool same_values(const std::vector<ValueInfo>& a, const std::vector<ValueInfo>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].type != b[i].type || a[i].shape != b[i].shape) return false;
  return true;
}

}  // namespace
}  // namespace detail

Core::Core(const NodeOptions& node) : runtime_(std::make_shared<detail::Runtime>(node)) {}

Core::~Core() = default;

uint16_t Core::publish(const std::map<std::string, CompiledModel>& models, uint16_t port,
                       const std::string& host) {
  caf::actor_system& system = runtime_->system();
  detail::NodeLink link(system);
  std::map<std::string, model_actor> actors;
  for (const auto& [name, model] : models) {
    if (!model) throw InvalidArgument("publish: model '" + name + "' is an empty CompiledModel");
    actors.emplace(name, as_actor(model));
  }
  auto directory = actors::spawn_model_directory(system, std::move(actors), nullptr);
  uint16_t bound = 0;
  try {
    bound = link.publish(directory, port, host);
  } catch (...) {
    caf::anon_send_exit(directory, caf::exit_reason::user_shutdown);
    throw;
  }
  if (!publications_) publications_.reset(new detail::Publications{link.connector(), {}, {}});
  publications_->directories.emplace_back(directory, bound);
  for (const auto& [name, model] : models) publications_->models.push_back(model);
  return bound;
}

CompiledModel Core::connect_remote(const std::string& host, uint16_t port, const std::string& model,
                                   const AnyMap& properties) {
  const bool v6 = host.find(':') != std::string::npos;
  return connect_replicas(model, {(v6 ? "[" + host + "]" : host) + ":" + std::to_string(port)},
                          CompiledModel(), properties);
}

CompiledModel Core::connect_replicas(const std::string& model,
                                     const std::vector<std::string>& endpoints,
                                     const CompiledModel& local, const AnyMap& properties) {
  caf::actor_system& system = runtime_->system();
  if (endpoints.empty() && !local)
    throw InvalidArgument("connect_replicas: no endpoint and no local model");
  detail::NodeLink link(system);
  const NodeOptions node = runtime_->node_options();

  // The properties of the local pipeline in front of the replicas.
  detail::CompileConfig config;
  auto remote = std::make_shared<actors::RemoteReplicas>();
  remote->request_timeout = node.request_timeout;
  remote->reconnect_interval = node.reconnect_interval;
  remote->connector = link.connector();
  int max_in_flight = 0;
  for (const auto& [key, value] : properties) {
    if (key == props::enable_profiling) {
      config.enable_profiling = value.as_bool();
    } else if (key == props::callback_thread) {
      config.callbacks_on_stage = detail::callbacks_on_stage(value);
    } else if (key == props::max_requests_in_flight) {
      max_in_flight = static_cast<int>(value.as_int());
      if (max_in_flight < 1)
        throw InvalidArgument("property MAX_REQUESTS_IN_FLIGHT must be at least 1");
    } else if (key == props::remote_timeout_ms) {
      if (value.as_int() < 1)
        throw InvalidArgument("property REMOTE_TIMEOUT_MS must be at least 1");
      remote->request_timeout = std::chrono::milliseconds(value.as_int());
    } else if (detail::is_scheduling_property(key) && key != "max_batch_size") {
      detail::apply_scheduling_property(config.scheduling, key, value);
    } else {
      throw UnknownProperty(
          "property '" + key +
          "' does not apply to a remote model (its node compiled it); "
          "supported: PERF_COUNT, CALLBACK_THREAD, MAX_REQUESTS_IN_FLIGHT, REMOTE_TIMEOUT_MS and "
          "the scheduling properties other than max_batch_size");
    }
  }
  detail::validate(config.scheduling);

  std::vector<detail::Contact> contacts;
  if (local) {
    detail::Contact c;
    c.replica.actor = as_actor(local);
    c.replica.label = "local";
    c.replica.model = model;
    c.description = detail::describe(system, c.replica.actor, remote->request_timeout, "local");
    contacts.push_back(std::move(c));
    remote->keep_alive = std::make_shared<CompiledModel>(local);
  }
  for (const std::string& endpoint : endpoints)
    contacts.push_back(detail::reach(system, link, endpoint, model, remote->request_timeout));

  const detail::Contact* first = nullptr;
  std::string failures;
  for (const auto& c : contacts) {
    if (!c.description.empty() && !first) first = &c;
    if (!c.error.empty()) failures += (failures.empty() ? "" : "; ") + c.error;
  }
  if (!first) throw RemoteUnavailable("no replica of model '" + model + "' answered: " + failures);
  detail::RemoteModelSpec spec;
  try {
    const auto description = nlohmann::json::parse(first->description);
    spec.name = description.at("name").get<std::string>();
    spec.inputs = detail::values_of(description.at("inputs"));
    spec.outputs = detail::values_of(description.at("outputs"));
    for (const auto& [key, value] : description.at("properties").items())
      spec.remote_properties[key] = value.get<std::string>();
    int optimal = 0;
    for (const auto& c : contacts) {
      if (c.description.empty()) continue;
      const auto other = nlohmann::json::parse(c.description);
      if (!detail::same_values(detail::values_of(other.at("inputs")), spec.inputs) ||
          !detail::same_values(detail::values_of(other.at("outputs")), spec.outputs))
        throw InvalidArgument("replica " + c.replica.label + " of model '" + model +
                              "' has other inputs or outputs than replica " + first->replica.label);
      optimal += std::stoi(
          other.at("properties").at(props::optimal_number_of_infer_requests).get<std::string>());
    }
    // Enough requests in flight to keep every replica's own pipeline full, and the replicas
    // not reached yet counted as if they were.
    const int reached = static_cast<int>(std::count_if(
        contacts.begin(), contacts.end(), [](const auto& c) { return !c.description.empty(); }));
    const int per_replica = std::max(1, optimal / std::max(1, reached));
    config.max_in_flight = max_in_flight > 0
                               ? max_in_flight
                               : std::max(2, 2 * per_replica * static_cast<int>(contacts.size()));
  } catch (const nlohmann::json::exception& e) {
    throw RemoteUnavailable("replica " + first->replica.label +
                            " sent an unreadable model description: " + e.what());
  }
  for (auto& c : contacts) remote->replicas.push_back(std::move(c.replica));
  config.max_in_flight_override = max_in_flight;
  config.optimal_requests = config.max_in_flight;
  // The execute "workers" of the stage report are the round trips that may be under way.
  config.num_streams = std::max(static_cast<int>(remote->replicas.size()), config.max_in_flight);
  config.mode = PerformanceMode::throughput;
  config.derive_scheduler_counts();
  config.scheduler_credits = config.max_in_flight;
  config.credit_per_stream = false;  // the replicas queue and batch themselves
  spec.config = config;
  spec.replicas = std::move(remote);
  return CompiledModel(std::make_shared<detail::CompiledModelImpl>(runtime_, std::move(spec)));
}

}  // namespace troupe
