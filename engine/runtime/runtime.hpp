#pragma once

#include <memory>
#include <optional>

#include "troupe/remote.hpp"

namespace caf {
class actor_system;
class actor_system_config;
}  // namespace caf

namespace troupe::detail {

/// The actor system troupe's pipelines run in: owned (made by Core()) or borrowed (given to
/// Core(caf::actor_system&)). Shared by the Core and every compiled model it made, so the system
/// outlives all of them.
class Runtime {
 public:
  Runtime();                                      // owns a system configured for troupe
  explicit Runtime(const NodeOptions& node);      // owns a networked one (middleman, TLS)
  explicit Runtime(caf::actor_system& borrowed);  // uses the caller's
  ~Runtime();
  caf::actor_system& system() { return *system_; }
  /// The node settings of a networked runtime made here (defaults for a borrowed system).
  NodeOptions node_options() const { return node_.value_or(NodeOptions{}); }

 private:
  explicit Runtime(const NodeOptions* node);
  std::optional<NodeOptions> node_;
  std::unique_ptr<caf::actor_system_config> config_;
  std::unique_ptr<caf::actor_system> owned_;
  caf::actor_system* system_;
};

}  // namespace troupe::detail
