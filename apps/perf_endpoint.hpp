#pragma once

#include <string>

namespace troupe::apps {

/// Where a server listens.
struct Endpoint {
  std::string host;
  std::string port;
  /// "host:port" ("[::1]:port" for an IPv6 address), for messages and the HTTP Host header.
  std::string text() const;
};

/// Parses "HOST:PORT", "HOST" (then `default_port`), "[IPv6]:PORT", with an optional "http://" or
/// "grpc://" in front and "/" behind. Throws PerfError for an empty host or a bad port.
Endpoint parse_endpoint(const std::string& url, int default_port);

}  // namespace troupe::apps
