#include "troupe/actor_interface.hpp"

#include "engine/runtime/compiled_model_impl.hpp"
#include "engine/runtime/node.hpp"
#include "troupe/error.hpp"

namespace troupe {

model_actor as_actor(const CompiledModel& model) {
  if (!model) throw InvalidArgument("as_actor: empty CompiledModel");
  return caf::actor_cast<model_actor>(model.impl()->pipeline().front());
}

void configure_actor_system(caf::actor_system_config& config, const NodeOptions& node) {
  detail::configure_actor_system(config, node, true);
}

}  // namespace troupe
