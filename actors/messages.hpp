#pragma once

// The messages the stage actors exchange. A request travels as a small `request_msg`; its tensors
// stay in the RequestState it points to, handed from stage to stage with the message.

#include <cstdint>
#include <exception>
#include <memory>

#include <caf/all.hpp>

#include "actors/request_state.hpp"

namespace troupe::actors {

/// admission <- caller: a request enters the pipeline.
using submit_atom = caf::atom_constant<caf::atom("submit")>;
/// stage -> next stage: process this request.
using stage_atom = caf::atom_constant<caf::atom("stage")>;
/// postprocess -> admission: one request left the pipeline, admit another.
using credit_atom = caf::atom_constant<caf::atom("credit")>;
/// download -> upload: an execute slot's buffers are free again.
using release_atom = caf::atom_constant<caf::atom("release")>;
/// postprocess/admission -> completion: the request is finished (or failed / cancelled).
using complete_atom = caf::atom_constant<caf::atom("complete")>;
/// owner -> admission: cancel everything parked; owner -> completion: quit once drained.
using drain_atom = caf::atom_constant<caf::atom("drain")>;

/// One request in flight: its id, its state, the timestamps the stages stamp on it (they become
/// the counters) and `slot`, the execute slot (a stream's buffer set) chosen by upload.
/// `error` set by any stage makes the following stages pass the message on without working, so
/// every request reaches completion exactly once and every slot and credit is returned.
///
/// The state pointer makes this a process-local message (CAF_ALLOW_UNSAFE_MESSAGE_TYPE): a stage
/// placed on another node would receive a serializable form carrying the tensors instead.
struct request_msg {
  uint64_t id = 0;
  std::shared_ptr<detail::RequestState> state;
  detail::RequestTrace trace;
  int32_t slot = -1;
  std::exception_ptr error;
};

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::request_msg)
