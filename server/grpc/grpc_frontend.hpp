#pragma once

#include <memory>
#include <string>

#include "server/server_context.hpp"

namespace troupe::server {

/// PEM files for TLS (empty: plaintext).
struct TlsFiles {
  std::string cert;
  std::string key;
  bool enabled() const { return !cert.empty(); }
};

/// The KServe v2 gRPC front end (inference.GRPCInferenceService) on gRPC's asynchronous callback
/// API: no thread waits for an inference; a ModelInfer becomes (infer_atom, NamedTensors) to the
/// model's actor and its reply finishes the call.
class GrpcFrontend {
 public:
  /// Binds host:port (0 = a free port) and starts serving; throws ServeError when it cannot.
  GrpcFrontend(ServerContext& context, const std::string& host, int port, const TlsFiles& tls);
  ~GrpcFrontend();
  GrpcFrontend(const GrpcFrontend&) = delete;
  GrpcFrontend& operator=(const GrpcFrontend&) = delete;

  /// The bound port.
  int port() const;
  /// Stops accepting calls and returns once every call in progress has been answered.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::server
