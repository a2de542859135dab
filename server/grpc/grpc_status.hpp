#pragma once

#include <grpcpp/support/status.h>

#include "server/serve_error.hpp"

namespace troupe::server {

/// The gRPC status code of an error code: bad_request -> INVALID_ARGUMENT, not_found -> NOT_FOUND,
/// unavailable -> UNAVAILABLE, internal -> INTERNAL.
grpc::StatusCode grpc_code_of(ServeErrc code);

/// The gRPC status of a request failure, carrying its message.
grpc::Status grpc_status_of(const ServeError& error);

/// Runs `f` and returns OK, or the status of what it threw (anything not a ServeError is INTERNAL),
/// so no exception reaches gRPC's callback threads.
template <class F>
grpc::Status status_of_call(F&& f) noexcept {
  try {
    f();
    return grpc::Status::OK;
  } catch (const ServeError& e) {
    return grpc_status_of(e);
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
  } catch (...) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "unknown error");
  }
}

}  // namespace troupe::server
