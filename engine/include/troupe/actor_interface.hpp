#pragma once

// Embedding troupe in a CAF application: a compiled model is also a typed actor. Send it
// (infer_atom, NamedTensors) and it replies with the outputs, or with a caf::error in the "troupe"
// category (see ActorErrc) whose context names the failure. This header is the only public one
// that includes CAF.

#include <cstdint>
#include <map>
#include <string>

#include <caf/all.hpp>

#include "troupe/compiled_model.hpp"
#include "troupe/core.hpp"
#include "troupe/tensor.hpp"

namespace troupe {

/// Tensors by input/output name.
using NamedTensors = std::map<std::string, Tensor>;

/// The request atom of the model actor.
using infer_atom = caf::atom_constant<caf::atom("infer")>;

/// The typed interface of a compiled model.
using model_actor = caf::typed_actor<caf::replies_to<infer_atom, NamedTensors>::with<NamedTensors>>;

/// Error codes of replies from a model actor (category atom "troupe").
enum class ActorErrc : uint8_t {
  invalid_input = 1,     // unknown / missing input, wrong shape or type
  pipeline_full = 2,     // too many requests waiting; retry later
  cancelled = 3,         // the compiled model was destroyed before the request ran
  execution_failed = 4,  // a stage or kernel failed
};

/// The category atom of troupe's caf::error values.
inline constexpr caf::atom_value troupe_error_category = caf::atom("troupe");

/// Makes a caf::error of troupe's category carrying `message` as context.
caf::error make_actor_error(ActorErrc code, std::string message);

/// The typed actor handle of a compiled model. The CompiledModel must stay alive while the handle
/// is used; afterwards the actor replies with ActorErrc::cancelled or is gone.
model_actor as_actor(const CompiledModel& model);

/// The actor system troupe's pipelines run in (the one given to Core(caf::actor_system&), or the
/// one Core made), so an application can spawn its own actors beside them.
caf::actor_system& actor_system_of(const Core& core);

}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::NamedTensors)
