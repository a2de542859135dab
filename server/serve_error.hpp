#pragma once

#include <stdexcept>
#include <string>

namespace troupe::server {

/// What went wrong with a request, in the terms both protocols map to a status code.
enum class ServeErrc {
  bad_request,  // malformed body, wrong datatype/shape, unknown input or output (HTTP 400)
  not_found,    // unknown model or version (HTTP 404)
  unavailable,  // model not ready, queue full, server shutting down (HTTP 503)
  internal,     // the pipeline failed the request (HTTP 500)
};

/// A request failure with a message that names the offending field, model or limit.
class ServeError : public std::runtime_error {
 public:
  ServeError(ServeErrc code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ServeErrc code() const { return code_; }

 private:
  ServeErrc code_;
};

/// A bad_request error: the request itself is at fault (its body, a datatype, a shape, a name).
inline ServeError bad_request(const std::string& message) {
  return ServeError(ServeErrc::bad_request, message);
}

/// Throws bad_request(message).
[[noreturn]] inline void throw_bad_request(const std::string& message) {
  throw bad_request(message);
}

/// The HTTP status of an error code.
int http_status(ServeErrc code);

/// The metrics label of an error code ("bad_request", "not_found", ...).
const char* reason_label(ServeErrc code);

}  // namespace troupe::server
