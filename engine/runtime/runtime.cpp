#include "engine/runtime/runtime.hpp"

#include <algorithm>
#include <thread>

#include <caf/all.hpp>

#include "engine/runtime/node.hpp"
#include "troupe/actor_interface.hpp"

namespace troupe::detail {

Runtime::Runtime() : Runtime(nullptr) {}

Runtime::Runtime(const NodeOptions& node) : Runtime(&node) {}

Runtime::Runtime(const NodeOptions* node) : config_(std::make_unique<caf::actor_system_config>()) {
  // "sharing" wakes idle workers on a condition variable: ~10x lower hop latency than the default
  // work-stealing poll/sleep loop on few cores, and no idle spinning. Stage handlers are short;
  // the long work (execute, unless the model is small; user callbacks) runs on detached actors
  // with threads of their own.
  // Fewer workers mean fewer cross-thread wake-ups per hop (on 2 cores, one worker instead of two
  // gave the ONNX MLP 21-22k vs 17-21k requests/s and 0.08-0.09 vs 0.13 ms latency), but with one
  // worker a stage doing real work (an image resize in preprocess) holds up every other scheduled
  // stage, and requests no longer overlap between those stages. Two at least, half the cores.
  config_->set("scheduler.policy", caf::atom("sharing"));
  const auto workers = std::max(2u, std::thread::hardware_concurrency() / 2);
  config_->set("scheduler.max-threads", static_cast<size_t>(workers));
  configure_actor_system(*config_, node ? *node : NodeOptions{}, node != nullptr);
  if (node) node_ = *node;
  owned_ = std::make_unique<caf::actor_system>(*config_);
  system_ = owned_.get();
}

Runtime::Runtime(caf::actor_system& borrowed) : system_(&borrowed) {}

Runtime::~Runtime() = default;

}  // namespace troupe::detail
