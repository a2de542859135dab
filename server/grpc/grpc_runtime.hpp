#pragma once

namespace troupe::server {

/// Turns off Abseil's mutex deadlock detection for this process. Debian builds Abseil without
/// NDEBUG, so every absl::Mutex that gRPC locks records its lock order in a global graph behind
/// one spin lock: a few percent of a gRPC server's or client's CPU time per small call, shared
/// across threads. gRPC's own mutexes are what it checks, and gRPC is tested upstream with it
/// off (release builds). Idempotent; call before the first channel or server is made.
void disable_grpc_mutex_deadlock_detection();

}  // namespace troupe::server
