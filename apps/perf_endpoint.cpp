#include "apps/perf_endpoint.hpp"

#include <algorithm>
#include <cctype>

#include "apps/perf_error.hpp"

namespace troupe::apps {

std::string Endpoint::text() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + port;
}

Endpoint parse_endpoint(const std::string& url, int default_port) {
  std::string rest = url;
  for (const char* scheme : {"http://", "grpc://"})
    if (rest.rfind(scheme, 0) == 0) rest.erase(0, std::string(scheme).size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();

  Endpoint e;
  std::string port;
  if (!rest.empty() && rest[0] == '[') {
    const size_t close = rest.find(']');
    if (close == std::string::npos) throw PerfError("bad address '" + url + "': no ']'");
    e.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') throw PerfError("bad address '" + url + "'");
      port = rest.substr(close + 2);
    }
  } else {
    const size_t colon = rest.rfind(':');
    e.host = rest.substr(0, colon);
    if (colon != std::string::npos) port = rest.substr(colon + 1);
  }
  if (e.host.empty()) throw PerfError("bad address '" + url + "': no host (expected HOST:PORT)");
  if (port.empty()) port = std::to_string(default_port);
  const bool digits =
      std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
  if (!digits || port.size() > 5 || std::stoi(port) < 1 || std::stoi(port) > 65535)
    throw PerfError("bad port '" + port + "' in '" + url + "' (expected 1-65535)");
  e.port = port;
  return e;
}

}  // namespace troupe::apps
