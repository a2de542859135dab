// The model directory a node publishes (Core::publish): one port serves every model, and a
// client asks for the one it wants by name.

#include "actors/model_directory.hpp"

namespace troupe::actors {

namespace {

struct DirectoryState {
  std::map<std::string, model_actor> models;
  std::shared_ptr<void> keep_alive;
};

model_directory::behavior_type directory(model_directory::stateful_pointer<DirectoryState> self,
                                         std::map<std::string, model_actor> models,
                                         std::shared_ptr<void> keep_alive) {
  self->state.models = std::move(models);
  self->state.keep_alive = std::move(keep_alive);
  return {
      [self](lookup_atom, const std::string& name) -> caf::result<model_actor> {
        auto it = self->state.models.find(name);
        if (it != self->state.models.end()) return it->second;
        std::string known;
        for (const auto& [model, actor] : self->state.models)
          known += (known.empty() ? "'" : ", '") + model + "'";
        return make_actor_error(ActorErrc::unknown_model,
                                "no model named '" + name + "' is published here (models: " +
                                    (known.empty() ? "none" : known) + ")");
      },
      [self](list_atom) {
        std::vector<std::string> names;
        for (const auto& [model, actor] : self->state.models) names.push_back(model);
        return names;
      },
  };
}

}  // namespace

model_directory spawn_model_directory(caf::actor_system& system,
                                      std::map<std::string, model_actor> models,
                                      std::shared_ptr<void> keep_alive) {
  return system.spawn(directory, std::move(models), std::move(keep_alive));
}

}  // namespace troupe::actors
