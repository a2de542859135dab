#pragma once

#include <cstdint>
#include <string>

#include <caf/io/middleman_actor.hpp>

#include "troupe/actor_protocol.hpp"
#include "troupe/remote.hpp"

namespace troupe::detail {

/// Registers troupe's message types (so they cross the network under the same names on every
/// node) and renders its errors; with `networked`, also loads CAF's middleman, OpenSSL's module
/// when `node.tls` is enabled (after checking its three files), and the heartbeat settings.
void configure_actor_system(caf::actor_system_config& config, const NodeOptions& node,
                            bool networked);

/// Whether `host` names this machine's loopback interface (127.0.0.0/8, ::1, "localhost").
bool is_loopback(const std::string& host);

/// How a networked actor system reaches other nodes.
class NodeLink {
 public:
  explicit NodeLink(caf::actor_system& system);
  bool tls() const { return tls_; }
  /// Publishes `directory` on host:port (0 = any free port) and returns the bound port.
  /// Refuses a non-loopback host without TLS, before binding anything.
  uint16_t publish(const model_directory& directory, uint16_t port, const std::string& host);
  /// The model directory a node publishes at host:port. Refuses a non-loopback host without TLS.
  model_directory connect(const std::string& host, uint16_t port);
  /// The actor that opens connections (the middleman's, or OpenSSL's with TLS).
  caf::io::middleman_actor connector() const;

 private:
  void check_transport(const std::string& host, const char* what) const;
  caf::actor_system& system_;
  bool tls_;
};

/// Splits "host:port" (also "[v6]:port"); throws InvalidArgument naming `endpoint`.
std::pair<std::string, uint16_t> parse_endpoint(const std::string& endpoint);

}  // namespace troupe::detail
