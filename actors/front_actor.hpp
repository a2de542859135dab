#pragma once

#include "actors/stage.hpp"
#include "troupe/actor_protocol.hpp"

namespace troupe::actors {

/// front -> itself (from the completion actor): the request with this token completed.
using done_atom = caf::atom_constant<caf::atom("done")>;

/// The model actor as implemented: the public interface plus the internal completion and drain
/// messages. Handed out as a plain model_actor.
using front_actor_type =
    model_actor::extend<caf::reacts_to<done_atom, uint64_t>, caf::reacts_to<drain_atom>>;

front_actor_type spawn_front_actor(caf::actor_system& system, Context ctx, Handles next);

}  // namespace troupe::actors
