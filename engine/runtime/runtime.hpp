#pragma once

#include <memory>

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
  explicit Runtime(caf::actor_system& borrowed);  // uses the caller's
  ~Runtime();
  caf::actor_system& system() { return *system_; }

 private:
  std::unique_ptr<caf::actor_system_config> config_;
  std::unique_ptr<caf::actor_system> owned_;
  caf::actor_system* system_;
};

}  // namespace troupe::detail
