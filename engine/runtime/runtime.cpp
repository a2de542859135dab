#include "engine/runtime/runtime.hpp"

#include <algorithm>
#include <thread>

#include <caf/all.hpp>
#include <caf/scheduler/coordinator.hpp>

#include "engine/runtime/deferred_wake_sharing.hpp"
#include "engine/runtime/node.hpp"
#include "troupe/actor_interface.hpp"

namespace troupe::detail {

Runtime::Runtime() : Runtime(nullptr) {}

Runtime::Runtime(const NodeOptions& node) : Runtime(&node) {}

Runtime::Runtime(const NodeOptions* node) : config_(std::make_unique<caf::actor_system_config>()) {
  // Work sharing (one central queue, idle workers asleep on a condition variable) wakes a hop's
  // receiver ~10x faster than work stealing's poll/sleep loop on few cores, and never spins; the
  // DeferredWakeSharing variant also keeps a request on one worker along the pipeline instead of
  // waking another for each hop (deferred_wake_sharing.hpp). Stage handlers are short; the long
  // work (execute, unless the model is small; user callbacks) runs on detached actors with threads
  // of their own.
  // Fewer workers mean fewer cross-thread wake-ups per hop (on 2 cores, one worker instead of two
  // gave the ONNX MLP 21-22k vs 17-21k requests/s and 0.08-0.09 vs 0.13 ms latency), but with one
  // worker a stage doing real work (an image resize in preprocess) holds up every other scheduled
  // stage, and requests no longer overlap between those stages. Two at least, half the cores.
  config_->module_factories.push_back([](caf::actor_system& sys) -> caf::actor_system::module* {
    return new caf::scheduler::coordinator<DeferredWakeSharing>(sys);
  });
  const auto workers = std::max(2u, std::thread::hardware_concurrency() / 2);
  config_->set("scheduler.max-threads", static_cast<size_t>(workers));
  // A few messages per turn: a job deferred by an actor waits at most that long (with CAF's
  // unbounded default, for the actor's whole mailbox).
  config_->set("scheduler.max-throughput", static_cast<size_t>(4));
  configure_actor_system(*config_, node ? *node : NodeOptions{}, node != nullptr);
  if (node) node_ = *node;
  owned_ = std::make_unique<caf::actor_system>(*config_);
  system_ = owned_.get();
}

Runtime::Runtime(caf::actor_system& borrowed) : system_(&borrowed) {}

Runtime::~Runtime() = default;

}  // namespace troupe::detail
