#pragma once

#include <string>

#include "apps/perf_endpoint.hpp"

namespace troupe::apps {

/// An HTTP reply's status and body.
struct HttpReply {
  unsigned status = 0;
  std::string body;
};

/// GETs `target` on a new connection, each step bounded by `timeout_s`. Throws PerfError when
/// the server cannot be reached or does not answer in time; any status is returned.
HttpReply http_get(const Endpoint& endpoint, const std::string& target, double timeout_s);

/// `body` on one line and at most `limit` characters, for messages.
std::string abbreviate(const std::string& body, size_t limit = 400);

}  // namespace troupe::apps
