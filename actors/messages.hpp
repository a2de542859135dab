#pragma once

// The messages the stage actors exchange. A request travels as a small `request_msg`; its tensors
// stay in the RequestState it points to, handed from stage to stage with the message.

#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include <caf/all.hpp>

#include "actors/request_state.hpp"
#include "engine/graph/scheduling_policy.hpp"

namespace troupe::actors {

/// scheduler <- caller: a request enters the pipeline.
using submit_atom = caf::atom_constant<caf::atom("submit")>;
/// stage -> next stage: process this batch.
using stage_atom = caf::atom_constant<caf::atom("stage")>;
/// completion -> scheduler: a batch left the pipeline (its callbacks ran), schedule another; the
/// Credit is what the batch size tuner learns from.
using credit_atom = caf::atom_constant<caf::atom("credit")>;
/// download -> upload: these execute slots' buffers are free again.
using release_atom = caf::atom_constant<caf::atom("release")>;
/// postprocess/scheduler -> completion: the batch is finished (or failed / cancelled).
using complete_atom = caf::atom_constant<caf::atom("complete")>;
/// owner -> scheduler: cancel everything waiting; owner -> completion: quit once drained.
using drain_atom = caf::atom_constant<caf::atom("drain")>;
/// owner -> scheduler: a new SchedulingPolicy for the next decisions.
using reconfigure_atom = caf::atom_constant<caf::atom("reconfig")>;
/// owner -> scheduler and upload: how many execute streams take new work (1..NUM_STREAMS
/// compiled), set live with CompiledModel::set_property(NUM_STREAMS).
using streams_atom = caf::atom_constant<caf::atom("streams")>;
/// owner -> scheduler: a request was cancelled; complete the cancelled ones that wait.
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
/// scheduler -> itself: a batch delay or a timeout may have passed.
using tick_atom = caf::atom_constant<caf::atom("tick")>;

/// A scheduler credit in flight: the batch that took it.
struct Credit {
  int32_t batch_size = 0;
  int64_t released_ns = 0;
  /// The batch's run built a shape specialization: its time says nothing of its size's cost.
  bool cold = false;
  /// The top priority level's credit (and stream), not one of the others'.
  bool top_stream = false;
};

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
  /// Exactly one request of each scheduled batch carries the scheduler's credit back, once the
  /// completion actor has run its callbacks (also when a stage splits the batch): its batch's size
  /// and when the scheduler released it. size 0: this request carries none.
  Credit credit;
};

/// What the stages pass on: the requests the scheduler released together (one request without
/// batching). Execute runs the requests that are still good as one merged run; every other stage
/// works on each request in turn, so one message and one thread wake-up serve the whole batch.
struct batch_msg {
  std::vector<request_msg> requests;
  /// Holds a request of the highest of several priority levels: it travels as CAF's urgent
  /// messages do, ahead of the ordinary ones in every mailbox on its way (a flood of low-priority
  /// submissions, refusals and their completions must not delay it).
  bool urgent = false;
  /// Runs on the top priority level's own stream (top_priority_stream): every other was busy.
  bool top_stream = false;
};

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::request_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::batch_msg)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::Credit)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::detail::SchedulingPolicy)
