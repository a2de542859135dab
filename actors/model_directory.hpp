#pragma once

#include <map>
#include <memory>
#include <string>

#include "troupe/actor_protocol.hpp"

namespace troupe::actors {

/// The actor a node publishes on its actor port: answers lookups of its models' actors by name
/// (ActorErrc::unknown_model naming the ones it has) and lists them. `keep_alive` holds what the
/// actors need (their CompiledModels) for as long as the directory lives.
model_directory spawn_model_directory(caf::actor_system& system,
                                      std::map<std::string, model_actor> models,
                                      std::shared_ptr<void> keep_alive);

}  // namespace troupe::actors
