// The error replies of the model actors (troupe/actor_protocol.hpp), made by the front actor.
#include "troupe/actor_protocol.hpp"

namespace troupe {

caf::error make_actor_error(ActorErrc code, std::string message) {
  return caf::error(static_cast<uint8_t>(code), troupe_error_category,
                    caf::make_message(std::move(message)));
}

}  // namespace troupe
