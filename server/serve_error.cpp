#include "server/serve_error.hpp"

namespace troupe::server {

int http_status(ServeErrc code) {
  switch (code) {
    case ServeErrc::bad_request:
      return 400;
    case ServeErrc::not_found:
      return 404;
    case ServeErrc::unavailable:
      return 503;
    case ServeErrc::internal:
      return 500;
  }
  return 500;
}

const char* reason_label(ServeErrc code) {
  switch (code) {
    case ServeErrc::bad_request:
      return "bad_request";
    case ServeErrc::not_found:
      return "not_found";
    case ServeErrc::unavailable:
      return "unavailable";
    case ServeErrc::internal:
      return "internal";
  }
  return "internal";
}

}  // namespace troupe::server
