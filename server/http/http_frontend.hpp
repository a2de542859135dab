#pragma once

#include <memory>
#include <string>

#include "server/grpc/grpc_frontend.hpp"
#include "server/server_context.hpp"

namespace troupe::server {

/// The KServe v2 REST front end on Boost.Beast: asynchronous keep-alive connections on a few I/O
/// threads; an infer request becomes (infer_atom, NamedTensors) to the model's actor and the
/// reply is written back from the connection's strand.
class HttpFrontend {
 public:
  /// Binds host:port (0 = a free port) and starts `threads` I/O threads; throws ServeError.
  HttpFrontend(ServerContext& context, const std::string& host, int port, int threads,
               const TlsFiles& tls);
  ~HttpFrontend();
  HttpFrontend(const HttpFrontend&) = delete;
  HttpFrontend& operator=(const HttpFrontend&) = delete;

  int port() const;
  /// Stops accepting, lets every request already received be answered, closes the connections.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::server
