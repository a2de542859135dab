#include "server/grpc/grpc_runtime.hpp"

#include <absl/synchronization/mutex.h>

namespace troupe::server {

void disable_grpc_mutex_deadlock_detection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace troupe::server
