#include "apps/perf_http_client.hpp"

#include <chrono>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "apps/perf_error.hpp"
#include "apps/perf_http_get.hpp"

namespace troupe::apps {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::string model_path(const std::string& model, const std::string& version) {
  return "/v2/models/" + model + (version.empty() ? "" : "/versions/" + version);
}

std::chrono::steady_clock::duration seconds_to_duration(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

// After a failed connect a slot waits this long before its next request, so a server that went
// away is not hammered with connects for the rest of the phase.
constexpr auto reconnect_pause = std::chrono::milliseconds(100);

class HttpTransport final : public InferTransport {
 public:
  HttpTransport(const Endpoint& endpoint, const std::string& target, HttpInferBody body,
                std::vector<TensorSpec> outputs, double timeout_s)
      : endpoint_(endpoint),
        timeout_(seconds_to_duration(timeout_s)),
        binary_(body.binary),
        outputs_(std::move(outputs)) {
    request_.method(http::verb::post);
    request_.target(target);
    request_.version(11);
    request_.set(http::field::host, endpoint.text());
    request_.set(http::field::user_agent, "troupe-perf");
    request_.set(http::field::content_type,
                 binary_ ? "application/octet-stream" : "application/json");
    if (binary_)
      request_.set("Inference-Header-Content-Length", std::to_string(body.header_length));
    request_.body() = std::move(body.body);
    request_.prepare_payload();
  }

  void open(int slots) override {
    connections_.clear();
    beast::error_code ec;
    tcp::resolver resolver(ioc_);
    addresses_ = resolver.resolve(endpoint_.host, endpoint_.port, ec);
    if (ec) throw PerfError("cannot resolve " + endpoint_.text() + ": " + ec.message());
    for (int i = 0; i < slots; ++i) connections_.push_back(std::make_unique<Connection>(ioc_));

    // Every connection is made before any load, so an unreachable server is reported at once.
    std::string failure;
    for (auto& c : connections_) {
      c->stream.expires_after(timeout_);
      c->stream.async_connect(
          addresses_, [this, &failure, c = c.get()](beast::error_code ec, const tcp::endpoint&) {
            if (ec && failure.empty()) failure = connect_error(ec);
            if (!ec) c->stream.socket().set_option(tcp::no_delay(true), ec);
          });
    }
    ioc_.restart();
    ioc_.run();
    if (!failure.empty()) throw PerfError(failure);
  }

  void run(LoadSchedule& schedule) override {
    schedule_ = &schedule;
    for (auto& c : connections_) asio::post(ioc_, [this, c = c.get()] { next(*c); });
    ioc_.restart();
    ioc_.run();
    schedule_ = nullptr;
  }

 private:
  struct Connection {
    explicit Connection(asio::io_context& ioc) : stream(ioc), pause(ioc) {}
    beast::tcp_stream stream;
    asio::steady_timer pause;
    beast::flat_buffer buffer;
    std::optional<http::response_parser<http::string_body>> parser;
    PerfClock::time_point sent;
    bool checked = false;  // a reply on this connection was checked in full
  };

  std::string connect_error(const beast::error_code& ec) const {
    return "cannot connect to " + endpoint_.text() + ": " + ec.message();
  }

  std::string io_error(const char* what, const beast::error_code& ec) const {
    if (ec == beast::error::timeout)
      return std::string(what) + ": no progress within the request timeout";
    return std::string(what) + ": " + ec.message();
  }

  void next(Connection& c) {
    if (!schedule_->try_start()) return;
    c.sent = PerfClock::now();
    if (c.stream.socket().is_open()) return send(c);
    c.stream.expires_after(timeout_);
    c.stream.async_connect(addresses_, [this, &c](beast::error_code ec, const tcp::endpoint&) {
      if (ec) return fail(c, connect_error(ec), true);
      c.stream.socket().set_option(tcp::no_delay(true), ec);
      send(c);
    });
  }

  void send(Connection& c) {
    c.stream.expires_after(timeout_);
    http::async_write(c.stream, request_, [this, &c](beast::error_code ec, size_t) {
      if (ec) return fail(c, io_error("sending the request", ec), false);
      c.parser.emplace();
      c.parser->body_limit(std::numeric_limits<std::uint64_t>::max());
      c.stream.expires_after(timeout_);
      http::async_read(c.stream, c.buffer, *c.parser, [this, &c](beast::error_code ec, size_t) {
        if (ec) return fail(c, io_error("reading the reply", ec), false);
        answered(c);
      });
    });
  }

  void answered(Connection& c) {
    const auto& reply = c.parser->get();
    const auto header_length = reply["Inference-Header-Content-Length"];
    // Each connection's first reply is parsed and checked in full; later ones by status and
    // framing only, so that the client's parsing does not take the CPU the server needs.
    const std::string error =
        check_http_infer_reply(reply.result_int(), reply.body(), std::string(header_length),
                               binary_, !c.checked, outputs_);
    if (error.empty()) c.checked = true;
    schedule_->finish(c.sent, error.empty(), error);
    if (!reply.keep_alive()) close(c);
    next(c);
  }

  void fail(Connection& c, const std::string& error, bool pause) {
    schedule_->finish(c.sent, false, error);
    close(c);
    if (!pause) return next(c);
    c.pause.expires_after(reconnect_pause);
    c.pause.async_wait([this, &c](beast::error_code) { next(c); });
  }

  static void close(Connection& c) {
    beast::error_code ignored;
    c.stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    c.stream.close();
    c.buffer.consume(c.buffer.size());
  }

  Endpoint endpoint_;
  std::chrono::steady_clock::duration timeout_;
  bool binary_;
  std::vector<TensorSpec> outputs_;
  http::request<http::string_body> request_;  // shared: a const message is only read
  asio::io_context ioc_{1};                   // one thread runs every connection
  tcp::resolver::results_type addresses_;
  std::vector<std::unique_ptr<Connection>> connections_;
  LoadSchedule* schedule_ = nullptr;
};

}  // namespace

ModelMetadata http_model_metadata(const Endpoint& endpoint, const std::string& model,
                                  const std::string& version, double timeout_s) {
  const std::string target = model_path(model, version);
  const HttpReply reply = http_get(endpoint, target, timeout_s);
  const std::string what = "model '" + model + "'" + (version.empty() ? "" : " version " + version);
  if (reply.status == 404)
    throw PerfError(what + " not found: HTTP 404: " + abbreviate(reply.body));
  if (reply.status != 200)
    throw PerfError("metadata of " + what + ": HTTP " + std::to_string(reply.status) + ": " +
                    abbreviate(reply.body));
  try {
    return metadata_from_json(nlohmann::json::parse(reply.body));
  } catch (const nlohmann::json::exception& e) {
    throw PerfError("metadata of " + what + " is not JSON: " + e.what());
  }
}

std::unique_ptr<InferTransport> make_http_transport(const Endpoint& endpoint,
                                                    const std::string& model,
                                                    const std::string& version, HttpInferBody body,
                                                    std::vector<TensorSpec> outputs,
                                                    double timeout_s) {
  return std::make_unique<HttpTransport>(endpoint, model_path(model, version) + "/infer",
                                         std::move(body), std::move(outputs), timeout_s);
}

}  // namespace troupe::apps
