#pragma once

#include <memory>

#include "actors/pipeline_context.hpp"
#include "engine/graph/scheduling_policy.hpp"

namespace caf {
class actor_system;
class actor;
}  // namespace caf

namespace troupe::actors {

/// The stage actors of one compiled model, wired together:
///
///   scheduler -> preprocess -> upload -> execute[stream] -> download -> postprocess -> completion
///       ^ credits (after the user callbacks) <--------------------------------------------'
///                            upload <- release(slot) <- download
///
/// plus the typed front actor (troupe/actor_interface.hpp). Destroying the Pipeline cancels parked
/// requests, waits for the ones inside the stages to complete, then stops every actor.
class Pipeline {
 public:
  /// `system_owner` keeps the actor system alive until the pipeline has shut down.
  Pipeline(caf::actor_system& system, std::shared_ptr<void> system_owner,
           std::shared_ptr<PipelineContext> context);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  /// Sends a request into the pipeline (the caller has marked it busy). `caller_waits`: the
  /// calling thread only waits for the request afterwards (a synchronous infer).
  void submit(std::shared_ptr<detail::RequestState> state, bool caller_waits = false);
  /// Asks the scheduler to complete the waiting requests that were cancelled.
  void cancel_waiting();
  /// Hands the scheduler a new policy for its next decisions.
  void reconfigure(const detail::SchedulingPolicy& policy);
  /// Lets only the first `streams` execute streams take new work (1..the compiled count); work
  /// already on the others finishes there.
  void set_active_streams(int streams);
  /// The typed front actor, as an untyped handle (cast with caf::actor_cast<model_actor>).
  caf::actor front() const;
  const std::shared_ptr<PipelineContext>& context() const;

 private:
  struct Actors;
  std::unique_ptr<Actors> actors_;
  std::shared_ptr<PipelineContext> context_;
  std::shared_ptr<void> system_owner_;
};

}  // namespace troupe::actors
