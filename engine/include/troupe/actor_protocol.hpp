#pragma once

// The messages of troupe's model actors: what a CAF application sends a compiled model's actor
// and what it replies (troupe/actor_interface.hpp gives the actor of a CompiledModel). This and
// actor_interface.hpp are the only public headers that include CAF.

#include <cstdint>
#include <map>
#include <string>

#include <caf/all.hpp>

#include "troupe/tensor.hpp"

namespace troupe {

/// Tensors by input/output name.
using NamedTensors = std::map<std::string, Tensor>;

/// The request atom of the model actor.
using infer_atom = caf::atom_constant<caf::atom("infer")>;

/// The typed interface of a compiled model: inputs in, outputs out; the second form also gives
/// the request's scheduling priority (1 = highest, 0 = the model's default) and queue timeout in
/// microseconds (0 = the default; see InferRequest::set_priority / set_timeout).
using model_actor = caf::typed_actor<
    caf::replies_to<infer_atom, NamedTensors>::with<NamedTensors>,
    caf::replies_to<infer_atom, NamedTensors, int64_t, int64_t>::with<NamedTensors>>;

/// Error codes of replies from a model actor (category atom "troupe").
enum class ActorErrc : uint8_t {
  invalid_input = 1,     // unknown / missing input, wrong shape or type
  pipeline_full = 2,     // too many requests waiting; retry later
  cancelled = 3,         // the compiled model was destroyed before the request ran
  execution_failed = 4,  // a stage or kernel failed
  timeout = 5,           // the request's queue timeout passed before it was scheduled
};

/// The category atom of troupe's caf::error values.
inline constexpr caf::atom_value troupe_error_category = caf::atom("troupe");

/// Makes a caf::error of troupe's category carrying `message` as context.
caf::error make_actor_error(ActorErrc code, std::string message);

}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::NamedTensors)
