#pragma once

// The messages of troupe's model actors: what a CAF application sends a compiled model's actor
// and what it replies (troupe/actor_interface.hpp gives the actor of a CompiledModel), and how
// they cross the network (CAF's middleman; troupe/remote.hpp). This and actor_interface.hpp are
// the only public headers that include CAF.

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <caf/all.hpp>

#include "troupe/tensor.hpp"

namespace troupe {

/// Tensors by input/output name.
using NamedTensors = std::map<std::string, Tensor>;

/// The request atom of the model actor.
using infer_atom = caf::atom_constant<caf::atom("infer")>;
/// Asks a model actor what it is: the reply is a JSON object {"name", "inputs", "outputs",
/// "properties"}, inputs and outputs as [{"name", "type", "shape"}] with -1 for a dynamic
/// dimension.
using describe_atom = caf::atom_constant<caf::atom("describe")>;

/// The typed interface of a compiled model: inputs in, outputs out; the second form also gives
/// the request's scheduling priority (1 = highest, 0 = the model's default) and queue timeout in
/// microseconds (0 = the default; see InferRequest::set_priority / set_timeout).
using model_actor = caf::typed_actor<
    caf::replies_to<infer_atom, NamedTensors>::with<NamedTensors>,
    caf::replies_to<infer_atom, NamedTensors, int64_t, int64_t>::with<NamedTensors>,
    caf::replies_to<describe_atom>::with<std::string>>;

/// Asks a node's model directory for the actor of a model by name.
using lookup_atom = caf::atom_constant<caf::atom("lookup")>;
/// Asks a node's model directory for the names of the models it publishes.
using list_atom = caf::atom_constant<caf::atom("list")>;

/// What a node publishes on its actor port (Core::publish): its models' actors by name.
using model_directory =
    caf::typed_actor<caf::replies_to<lookup_atom, std::string>::with<model_actor>,
                     caf::replies_to<list_atom>::with<std::vector<std::string>>>;

/// Error codes of replies from a model actor (category atom "troupe").
enum class ActorErrc : uint8_t {
  invalid_input = 1,       // unknown / missing input, wrong shape or type
  pipeline_full = 2,       // too many requests waiting; retry later
  cancelled = 3,           // the compiled model was destroyed before the request ran
  execution_failed = 4,    // a stage or kernel failed
  timeout = 5,             // the request's queue timeout passed before it was scheduled
  unknown_model = 6,       // a model directory has no model of that name
  remote_unavailable = 7,  // no replica answered in time (lost, unreachable or too slow)
};

/// The category atom of troupe's caf::error values.
inline constexpr caf::atom_value troupe_error_category = caf::atom("troupe");

/// Makes a caf::error of troupe's category carrying `message` as context.
caf::error make_actor_error(ActorErrc code, std::string message);

/// The wire form of a tensor (element type, dimensions, dense row-major bytes) and the limits a
/// receiver enforces before it allocates anything: a message that breaks them is refused with an
/// error, never trusted.
namespace wire {
inline constexpr uint32_t max_rank = 16;
inline constexpr uint64_t max_tensor_bytes = uint64_t{1} << 32;  // 4 GiB
caf::error save_tensor(caf::serializer& sink, const Tensor& tensor);
caf::error load_tensor(caf::deserializer& source, Tensor& tensor);
std::string describe_tensor(const Tensor& tensor);
}  // namespace wire

/// CAF 0.17 inspection of a Tensor: binary on the wire, a summary (type and shape) as text.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Tensor& tensor) {
  if constexpr (std::is_base_of<caf::serializer, Inspector>::value)
    return wire::save_tensor(f, tensor);
  else if constexpr (std::is_base_of<caf::deserializer, Inspector>::value)
    return wire::load_tensor(f, tensor);
  else
    return f(caf::meta::type_name("troupe::Tensor"), wire::describe_tensor(tensor));
}

}  // namespace troupe
