#pragma once

#include "actors/stage.hpp"

namespace troupe::actors {

/// The router of a remote-backed pipeline (ctx->remote set): takes batches from preprocess and
/// hands each request to postprocess once a replica answered.
caf::actor spawn_router_stage(caf::actor_system& system, Context ctx, Handles next);

}  // namespace troupe::actors
