#include "server/http/http_frontend.hpp"

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "server/http/kserve_json.hpp"
#include "server/http/rest_routes.hpp"
#include "server/serve_error.hpp"

namespace troupe::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

constexpr const char* header_length_field = "Inference-Header-Content-Length";

// Requests read and dispatched but not yet answered, across all connections: shutdown waits for
// them to reach zero.
class InFlight {
 public:
  void enter() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_;
  }
  void leave() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--count_ == 0) zero_.notify_all();
  }
  bool wait_zero(std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return zero_.wait_for(lock, timeout, [&] { return count_ == 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable zero_;
  int64_t count_ = 0;
};

struct Shared {
  ServerContext& context;
  RestRoutes& routes;
  InFlight& in_flight;
};

std::optional<size_t> parse_header_length(const http::request<http::string_body>& req) {
  auto it = req.find(header_length_field);
  if (it == req.end()) return std::nullopt;
  const std::string value(it->value());
  if (value.empty() || value.size() > 18 ||
      value.find_first_not_of("0123456789") != std::string::npos)
    throw ServeError(ServeErrc::bad_request,
                     std::string(header_length_field) + " '" + value + "' is not a byte count");
  return static_cast<size_t>(std::stoull(value));
}

// One connection: read a request, hand it to the routes, write the reply when it comes (posted
// to this connection's strand), then read the next one on the kept-alive connection.
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream stream, Shared shared) : stream_(std::move(stream)), shared_(shared) {}

  void start() {
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      read();
    } else {
      beast::get_lowest_layer(stream_).expires_after(shared_.context.limits.read_timeout);
      stream_.async_handshake(net::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (!ec) self->read();
                              });
    }
  }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(shared_.context.limits.max_body_bytes);
    parser_->header_limit(64 * 1024);
    // The idle timeout covers the wait for the next request on a kept-alive connection and the
    // read timeout its transfer: Beast's stream timeout covers the whole read, so the longer one.
    beast::get_lowest_layer(stream_).expires_after(
        std::max(shared_.context.limits.idle_timeout, shared_.context.limits.read_timeout));
    http::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::eof ||
        ec == net::error::connection_reset)
      return close();
    if (ec) {
      // Malformed HTTP or a limit: answer once, naming it, and close (the stream's framing is
      // lost).
      std::string message = "malformed HTTP request: " + ec.message();
      if (ec == http::error::body_limit)
        message = "the request body is larger than the limit of " +
                  std::to_string(shared_.context.limits.max_body_bytes) + " bytes";
      else if (ec == http::error::header_limit)
        message = "the request headers are larger than the limit of 65536 bytes";
      keep_alive_ = false;
      version_ = 11;
      shared_.in_flight.enter();
      write(HttpReply{400, error_body(message), "application/json", std::nullopt});
      return;
    }
    request_ = parser_->release();
    keep_alive_ = request_.keep_alive();
    version_ = request_.version();
    shared_.in_flight.enter();
    if (!shared_.context.accepting) {
      keep_alive_ = false;
      write(HttpReply{503, error_body("the server is shutting down"), "application/json",
                      std::nullopt});
      return;
    }
    beast::get_lowest_layer(stream_).expires_never();  // inference may take long
    auto self = this->shared_from_this();
    ReplyFunction reply = [self](HttpReply r) {
      net::post(self->stream_.get_executor(),
                [self, r = std::move(r)]() mutable { self->write(std::move(r)); });
    };
    try {
      const HttpRequestView view{request_.method_string(), request_.target(), request_.body(),
                                 parse_header_length(request_)};
      shared_.routes.handle(view, std::move(reply));
    } catch (const ServeError& e) {
      write(
          HttpReply{http_status(e.code()), error_body(e.what()), "application/json", std::nullopt});
    }
  }

  void write(HttpReply reply) {
    request_ = {};  // the body is decoded by now; free it before the response is written
    response_.emplace(static_cast<http::status>(reply.status), version_);
    response_->set(http::field::server, "troupe");
    response_->set(http::field::content_type, reply.content_type);
    if (reply.header_length)
      response_->set(header_length_field, std::to_string(*reply.header_length));
    response_->keep_alive(keep_alive_ && shared_.context.accepting);
    response_->body() = std::move(reply.body);
    response_->prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(shared_.context.limits.read_timeout);
    http::async_write(
        stream_, *response_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    const bool keep = !ec && response_->keep_alive();
    response_.reset();
    shared_.in_flight.leave();
    if (keep)
      read();
    else
      close();
  }

  void close() {
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  Stream stream_;
  Shared shared_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  std::optional<http::response<http::string_body>> response_;
  bool keep_alive_ = true;
  unsigned version_ = 11;
};

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ServeError(ServeErrc::bad_request, std::string(what) + " '" + path + "' cannot be read");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

struct HttpFrontend::Impl {
  Impl(ServerContext& c, int thread_count) : context(c), routes(c), threads_wanted(thread_count) {}

  void accept() {
    acceptor->async_accept(net::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
        return accept();  // e.g. too many open files: keep serving the connections we have
      }
      Shared shared{context, routes, in_flight};
      if (ssl) {
        std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
            beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(socket)), *ssl),
            shared)
            ->start();
      } else {
        std::make_shared<Session<beast::tcp_stream>>(beast::tcp_stream(std::move(socket)), shared)
            ->start();
      }
      accept();
    });
  }

  ServerContext& context;
  RestRoutes routes;
  InFlight in_flight;
  int threads_wanted;
  net::io_context io;
  // Keeps the I/O threads running while no socket operation is pending: at shutdown the listener
  // closes first, and a request whose model is still running has nothing pending until its reply
  // is posted. Without it io.run() returned in every thread and that reply was never written.
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::optional<net::ssl::context> ssl;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::once_flag stopped;
};

HttpFrontend::HttpFrontend(ServerContext& context, const std::string& host, int port, int threads,
                           const TlsFiles& tls)
    : impl_(std::make_unique<Impl>(context, std::max(1, threads))) {
  if (tls.enabled()) {
    impl_->ssl.emplace(net::ssl::context::tls_server);
    impl_->ssl->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                            net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                            net::ssl::context::no_tlsv1_1);
    const std::string cert = read_file(tls.cert, "TLS certificate");
    const std::string key = read_file(tls.key, "TLS key");
    beast::error_code ec;
    impl_->ssl->use_certificate_chain(net::buffer(cert), ec);
    if (ec)
      throw ServeError(ServeErrc::bad_request,
                       "TLS certificate '" + tls.cert + "': " + ec.message());
    impl_->ssl->use_private_key(net::buffer(key), net::ssl::context::pem, ec);
    if (ec) throw ServeError(ServeErrc::bad_request, "TLS key '" + tls.key + "': " + ec.message());
  }
  beast::error_code ec;
  const auto address = net::ip::make_address(host, ec);
  if (ec) throw ServeError(ServeErrc::bad_request, "--host '" + host + "' is not an IP address");
  impl_->acceptor.emplace(impl_->io);
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  impl_->acceptor->open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor->bind(endpoint, ec);
  if (!ec) impl_->acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    throw ServeError(ServeErrc::unavailable, "HTTP: cannot listen on " + host + ":" +
                                                 std::to_string(port) + ": " + ec.message());
  impl_->accept();
  impl_->work.emplace(net::make_work_guard(impl_->io));
  for (int i = 0; i < impl_->threads_wanted; ++i)
    impl_->threads.emplace_back([this] { impl_->io.run(); });
}

HttpFrontend::~HttpFrontend() {
  shutdown();
}

int HttpFrontend::port() const {
  return impl_->acceptor->local_endpoint().port();
}

void HttpFrontend::shutdown() {
  std::call_once(impl_->stopped, [this] {
    net::post(impl_->io, [this] {
      beast::error_code ignored;
      impl_->acceptor->close(ignored);
    });
    // Every request already read is answered before the connections close.
    impl_->in_flight.wait_zero(std::chrono::seconds(60));
    impl_->work.reset();
    impl_->io.stop();
    for (auto& t : impl_->threads) t.join();
  });
}

}  // namespace troupe::server
