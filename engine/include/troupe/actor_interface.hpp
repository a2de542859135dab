#pragma once

// Embedding troupe in a CAF application: a compiled model is also a typed actor. Send it
// (infer_atom, NamedTensors) and it replies with the outputs, or with a caf::error in the "troupe"
// category (see ActorErrc) whose context names the failure. Besides troupe/actor_protocol.hpp,
// which declares the messages, this is the only public header that includes CAF.

#include "troupe/actor_protocol.hpp"
#include "troupe/compiled_model.hpp"
#include "troupe/core.hpp"
#include "troupe/remote.hpp"
#include "troupe/tensor.hpp"

namespace troupe {

/// The typed actor handle of a compiled model. The CompiledModel must stay alive while the handle
/// is used; afterwards the actor replies with ActorErrc::cancelled or is gone.
model_actor as_actor(const CompiledModel& model);

/// Prepares an application's actor system config for troupe on the network: registers troupe's
/// message types (NamedTensors, model_actor, model_directory), loads CAF's middleman and, with
/// `node.tls` set, the OpenSSL module with its certificates. Give the system to Core(system) to
/// publish and connect through it. Throws InvalidArgument naming a certificate file it cannot
/// read.
void configure_actor_system(caf::actor_system_config& config, const NodeOptions& node = {});

/// The actor system troupe's pipelines run in (the one given to Core(caf::actor_system&), or the
/// one Core made), so an application can spawn its own actors beside them. In a system Core made,
/// a worker runs the first actor its current actor sends to itself, after the current handler
/// returns, rather than waking another worker (one worker follows a request along the pipeline),
/// and a turn is at most 4 messages. So a handler must not block, as CAF requires anyway: one that
/// blocks after a send delays that message (an idle worker picks it up within 10 ms).
caf::actor_system& actor_system_of(const Core& core);

}  // namespace troupe
