#pragma once

// Settings of a networked Core (Core(NodeOptions)): one that can publish its compiled models to
// other nodes and use theirs (Core::publish, Core::connect_remote, Core::connect_replicas), over
// CAF's middleman, with TLS where it leaves the machine.

#include <chrono>
#include <string>

namespace troupe {

/// Certificates of a node. With all three files set, every connection (published or made) is
/// TLS with both sides verified against `ca_file`; troupe refuses to publish on or connect to a
/// non-loopback address without them (CAF would otherwise use an anonymous cipher that anyone in
/// the middle can read and inject into).
struct TlsOptions {
  std::string certificate;  ///< PEM file: this node's certificate
  std::string key;          ///< PEM file: its private key
  std::string ca_file;      ///< PEM file: the CA that signed the peers' certificates
  std::string passphrase;   ///< of the key, when it is encrypted
  /// True when any file is set (then all three are required).
  bool enabled() const { return !certificate.empty() || !key.empty() || !ca_file.empty(); }
};

/// How a networked Core talks to other nodes.
struct NodeOptions {
  TlsOptions tls;
  /// How long a remote replica may take to answer one request before it counts as lost (the
  /// request then goes once to another replica, or fails with RemoteUnavailable). Also bounds
  /// connecting. The compile property REMOTE_TIMEOUT_MS overrides it per remote model.
  std::chrono::milliseconds request_timeout{30000};
  /// How often a lost replica is tried again.
  std::chrono::milliseconds reconnect_interval{500};
  /// Heartbeats between connected nodes, and how long a silent connection lives (a peer that
  /// vanishes without closing its socket is dropped after this).
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds connection_timeout{10000};
};

}  // namespace troupe
