#include "server/grpc/grpc_frontend.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include "server/grpc/grpc_inference_service.hpp"
#include "server/grpc/grpc_runtime.hpp"
#include "server/serve_error.hpp"

namespace troupe::server {

namespace {

// In-flight calls get this long to be answered once shutdown() begins; later ones are cancelled.
constexpr std::chrono::seconds shutdown_grace{30};
// How long after the last answer the connections stay open, for clients to read it.
constexpr std::chrono::milliseconds shutdown_linger{200};

std::string read_pem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || text.str().empty())
    throw ServeError(ServeErrc::bad_request,
                     std::string("gRPC TLS: cannot read the ") + what + " file '" + path + "'");
  return text.str();
}

std::shared_ptr<grpc::ServerCredentials> credentials(const TlsFiles& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  if (tls.key.empty())
    throw ServeError(ServeErrc::bad_request,
                     "gRPC TLS: the certificate '" + tls.cert + "' needs a private key file");
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back(
      {read_pem(tls.key, "private key"), read_pem(tls.cert, "certificate")});
  return grpc::SslServerCredentials(options);
}

// gRPC's address syntax wants IPv6 literals in brackets.
std::string address_of(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

int message_limit(size_t bytes) {
  return static_cast<int>(std::min<size_t>(bytes, static_cast<size_t>(INT_MAX)));
}

}  // namespace

struct GrpcFrontend::Impl {
  explicit Impl(ServerContext& context) : service(context) {}

  InferenceService service;  // declared first: the server, destroyed first, uses it to the end
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::mutex shutdown_mutex;
  bool stopped = false;  // guarded by shutdown_mutex
};

GrpcFrontend::GrpcFrontend(ServerContext& context, const std::string& host, int port,
                           const TlsFiles& tls)
    : impl_(std::make_unique<Impl>(context)) {
  if (port < 0 || port > 65535)
    throw ServeError(ServeErrc::bad_request,
                     "gRPC port " + std::to_string(port) + " is not in 0..65535");
  const std::string address = address_of(host, port);
  disable_grpc_mutex_deadlock_detection();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, credentials(tls), &impl_->port);
  builder.RegisterService(&impl_->service);
  builder.SetMaxReceiveMessageSize(message_limit(context.limits.max_body_bytes));
  // Outputs may well be larger than inputs; the client bounds what it accepts.
  builder.SetMaxSendMessageSize(INT_MAX);
  // gRPC sets SO_REUSEPORT by default, so a second server on the same port would "succeed" and
  // steal half the connections; a taken port must fail instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0)
    throw ServeError(ServeErrc::unavailable,
                     "gRPC cannot listen on " + address + " (address in use or not local?)");
}

GrpcFrontend::~GrpcFrontend() {
  try {
    shutdown();
  } catch (...) {
    // A destructor must not throw; shutdown() only fails when gRPC itself does.
  }
}

int GrpcFrontend::port() const {
  return impl_->port;
}

void GrpcFrontend::shutdown() {
  std::lock_guard<std::mutex> lock(impl_->shutdown_mutex);
  if (impl_->stopped || !impl_->server) return;
  impl_->stopped = true;
  // New calls are refused at once, and every inference call in progress is answered (replies
  // always come: the model actor answers or errors). Only then does gRPC close the connections,
  // after a short linger: a connection closed while a client's frames are still unread is reset
  // (TCP RST), and the client then loses a reply it had not read yet (seen on loopback under
  // load: "recvmsg: Connection reset by peer" for an answered call).
  const auto last_answer = impl_->service.drain(std::chrono::steady_clock::now() + shutdown_grace);
  std::this_thread::sleep_until(last_answer + shutdown_linger);
  // Every admitted call is answered by now (or the grace is spent): what is left are calls gRPC
  // had not handed to the service yet, which it cancels at this deadline.
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  impl_->server->Wait();
}

}  // namespace troupe::server
