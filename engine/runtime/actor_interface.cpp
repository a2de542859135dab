#include "troupe/actor_interface.hpp"

#include "engine/runtime/compiled_model_impl.hpp"
#include "troupe/error.hpp"

namespace troupe {

model_actor as_actor(const CompiledModel& model) {
  if (!model) throw InvalidArgument("as_actor: empty CompiledModel");
  return caf::actor_cast<model_actor>(model.impl()->pipeline().front());
}

}  // namespace troupe
