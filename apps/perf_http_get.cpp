#include "apps/perf_http_get.hpp"

#include <chrono>
#include <cstdint>
#include <limits>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "apps/perf_error.hpp"

namespace troupe::apps {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

HttpReply http_get(const Endpoint& endpoint, const std::string& target, double timeout_s) {
  // Asynchronous operations on a private io_context: the synchronous ones cannot time out.
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  beast::error_code ec;
  const auto addresses = resolver.resolve(endpoint.host, endpoint.port, ec);
  if (ec) throw PerfError("cannot resolve " + endpoint.text() + ": " + ec.message());

  const auto timeout = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(timeout_s));
  beast::tcp_stream stream(ioc);
  http::request<http::empty_body> request{http::verb::get, target, 11};
  request.set(http::field::host, endpoint.text());
  request.set(http::field::user_agent, "troupe-perf");
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  beast::flat_buffer buffer;
  std::string failure;

  stream.expires_after(timeout);
  stream.async_connect(addresses, [&](beast::error_code ec, const tcp::endpoint&) {
    if (ec) {
      failure = "cannot connect to " + endpoint.text() + ": " + ec.message();
      return;
    }
    stream.expires_after(timeout);
    http::async_write(stream, request, [&](beast::error_code ec, size_t) {
      if (ec) {
        failure = "GET " + target + " on " + endpoint.text() + ": " + ec.message();
        return;
      }
      stream.expires_after(timeout);
      http::async_read(stream, buffer, parser, [&](beast::error_code ec, size_t) {
        if (ec) failure = "GET " + target + " on " + endpoint.text() + ": " + ec.message();
      });
    });
  });
  ioc.run();
  if (!failure.empty()) throw PerfError(failure);
  return {parser.get().result_int(), parser.get().body()};
}

std::string abbreviate(const std::string& body, size_t limit) {
  std::string line;
  for (char c : body) {
    if (line.size() >= limit) return line + "...";
    line += (c == '\n' || c == '\r') ? ' ' : c;
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

}  // namespace troupe::apps
