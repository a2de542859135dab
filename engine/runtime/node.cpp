// A networked node: troupe's message types registered under fixed names, CAF's middleman (and
// OpenSSL's module for TLS) loaded, and the one rule troupe adds on top: nothing is published on
// or sent to an address off this machine without TLS, since CAF 0.17 without certificates falls
// back to an anonymous, unverified cipher.

#include "engine/runtime/node.hpp"

#include <arpa/inet.h>

#include <fstream>

#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include "engine/runtime/tls_error_isolation.hpp"
#include "troupe/error.hpp"

namespace troupe::detail {

namespace {

void check_readable(const std::string& path, const char* what) {
  if (path.empty())
    throw InvalidArgument(std::string("TLS: the ") + what +
                          " file is not set (TLS needs certificate, key and CA file)");
  std::ifstream file(path);
  if (!file)
    throw InvalidArgument(std::string("TLS: cannot read the ") + what + " file '" + path + "'");
}

caf::timespan to_timespan(std::chrono::milliseconds ms) {
  return std::chrono::duration_cast<caf::timespan>(ms);
}

}  // namespace

void configure_actor_system(caf::actor_system_config& config, const NodeOptions& node,
                            bool networked) {
  config.add_message_type<Tensor>("troupe::Tensor");
  config.add_message_type<NamedTensors>("troupe::NamedTensors");
  config.add_message_type<model_actor>("troupe::model_actor");
  config.add_message_type<model_directory>("troupe::model_directory");
  config.add_error_category(
      troupe_error_category, [](uint8_t code, caf::atom_value, const caf::message& context) {
        return "troupe error " + std::to_string(code) + " " + caf::to_string(context);
      });
  if (!networked) return;
  config.load<caf::io::middleman>();
  config.set("middleman.heartbeat-interval", to_timespan(node.heartbeat_interval));
  config.set("middleman.connection-timeout", to_timespan(node.connection_timeout));
  if (node.tls.enabled()) {
    check_readable(node.tls.certificate, "certificate");
    check_readable(node.tls.key, "key");
    check_readable(node.tls.ca_file, "CA");
    config.openssl_certificate = node.tls.certificate;
    config.openssl_key = node.tls.key;
    config.openssl_cafile = node.tls.ca_file;
    config.openssl_passphrase = node.tls.passphrase;
    isolate_tls_errors_per_call();
    config.load<caf::openssl::manager>();
  }
}

bool is_loopback(const std::string& host) {
  if (host == "localhost" || host == "ip6-localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

std::pair<std::string, uint16_t> parse_endpoint(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == endpoint.size())
    throw InvalidArgument("endpoint '" + endpoint + "' is not HOST:PORT");
  std::string host = endpoint.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string digits = endpoint.substr(colon + 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 5 ||
      std::stoul(digits) == 0 || std::stoul(digits) > 65535)
    throw InvalidArgument("endpoint '" + endpoint + "': port '" + digits + "' is not 1-65535");
  return {host, static_cast<uint16_t>(std::stoul(digits))};
}

NodeLink::NodeLink(caf::actor_system& system)
    : system_(system), tls_(system.has_openssl_manager()) {
  if (!system.has_middleman())
    throw InvalidArgument(
        "this Core is not networked: construct it with Core(NodeOptions) (or give it an actor "
        "system set up by troupe::configure_actor_system) to publish or connect");
}

void NodeLink::check_transport(const std::string& host, const char* what) const {
  if (!tls_ && !is_loopback(host))
    throw InvalidArgument(std::string("refusing to ") + what + " '" + host +
                          "' without TLS: tensors would cross the network unauthenticated and "
                          "readable; give the node a certificate, key and CA file "
                          "(NodeOptions::tls, --tls-cert/--tls-key/--tls-ca)");
}

uint16_t NodeLink::publish(const model_directory& directory, uint16_t port,
                           const std::string& host) {
  check_transport(host.empty() ? "0.0.0.0" : host, "publish on");
  const char* in = host.empty() ? nullptr : host.c_str();
  auto bound = tls_ ? caf::openssl::publish(directory, port, in, true)
                    : system_.middleman().publish(directory, port, in, true);
  if (!bound)
    throw RemoteUnavailable("cannot publish on " + host + ":" + std::to_string(port) + ": " +
                            system_.render(bound.error()));
  return *bound;
}

model_directory NodeLink::connect(const std::string& host, uint16_t port) {
  check_transport(host, "connect to");
  auto directory = tls_ ? caf::openssl::remote_actor<model_directory>(system_, host, port)
                        : system_.middleman().remote_actor<model_directory>(host, port);
  if (!directory)
    throw RemoteUnavailable("cannot reach a troupe node at " + host + ":" + std::to_string(port) +
                            (tls_ ? " (TLS)" : "") + ": " + system_.render(directory.error()));
  return *directory;
}

caf::io::middleman_actor NodeLink::connector() const {
  return tls_ ? system_.openssl_manager().actor_handle() : system_.middleman().actor_handle();
}

}  // namespace troupe::detail
