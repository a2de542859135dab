#include "server/grpc/grpc_status.hpp"

namespace troupe::server {

grpc::StatusCode grpc_code_of(ServeErrc code) {
  switch (code) {
    case ServeErrc::bad_request:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case ServeErrc::not_found:
      return grpc::StatusCode::NOT_FOUND;
    case ServeErrc::unavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case ServeErrc::internal:
      return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

grpc::Status grpc_status_of(const ServeError& error) {
  return grpc::Status(grpc_code_of(error.code()), error.what());
}

}  // namespace troupe::server
