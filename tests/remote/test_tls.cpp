// Nodes that verify each other: certificates from a throwaway CA made with `openssl` at test
// time; a peer with a certificate from another CA, or without TLS, is refused.

#include <gmock/gmock.h>

#include <cstdlib>
#include <filesystem>
#include <future>

#include "remote_fixture.hpp"

using namespace troupe;
using namespace troupe::test;
using ::testing::HasSubstr;

namespace {

namespace fs = std::filesystem;

void run(const std::string& command) {
  ASSERT_EQ(std::system((command + " >/dev/null 2>&1").c_str()), 0) << command;
}

// A CA and certificates it signs (EC P-256 keys), in a temporary directory.
class Pki {
 public:
  explicit Pki(const std::string& name) {
    dir_ = fs::temp_directory_path() / ("troupe_tls_" + name + "_" + std::to_string(::getpid()) +
                                        "_" + std::to_string(std::rand()));
    fs::create_directories(dir_);
    run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
        "-subj /CN=" +
        name + "-ca -keyout " + path("ca.key") + " -out " + path("ca.pem"));
  }
  ~Pki() { fs::remove_all(dir_); }

  TlsOptions issue(const std::string& who) const {
    run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=" + who +
        " -keyout " + path(who + ".key") + " -out " + path(who + ".csr"));
    run("openssl x509 -req -days 1 -in " + path(who + ".csr") + " -CA " + path("ca.pem") +
        " -CAkey " + path("ca.key") + " -CAcreateserial -out " + path(who + ".pem"));
    return TlsOptions{path(who + ".pem"), path(who + ".key"), path("ca.pem"), ""};
  }

  std::string path(const std::string& file) const { return (dir_ / file).string(); }

 private:
  fs::path dir_;
};

NodeOptions with_tls(TlsOptions tls) {
  NodeOptions options;
  options.tls = std::move(tls);
  options.request_timeout = std::chrono::seconds(10);
  return options;
}

}  // namespace

TEST(Tls, NodesWithCertificatesFromTheSameCaTalk) {
  Pki pki("trusted");
  ServingNode server(with_tls(pki.issue("server")));
  Core client(with_tls(pki.issue("client")));
  CompiledModel remote = client.connect_remote("127.0.0.1", server.port, "add_relu");
  EXPECT_EQ(run_checked(remote, 500, 8, 2), 0);
}

TEST(Tls, WithCertificatesANodeMayPublishOffLoopback) {
  Pki pki("wide");
  Core node(with_tls(pki.issue("server")));
  auto model = node.compile_model(make_add_relu_model());
  const uint16_t port = node.publish({{"add_relu", model}}, 0, "0.0.0.0");
  Core client(with_tls(pki.issue("client")));
  CompiledModel remote = client.connect_remote("127.0.0.1", port, "add_relu");
  EXPECT_EQ(run_checked(remote, 50, 4, 1), 0);
}

TEST(Tls, APeerFromAnotherCaIsRefused) {
  Pki trusted("trusted"), rogue("rogue");
  ServingNode server(with_tls(trusted.issue("server")));
  // A client whose certificate another CA signed, even though it trusts the server's CA.
  TlsOptions mixed = rogue.issue("intruder");
  mixed.ca_file = trusted.path("ca.pem");
  Core intruder(with_tls(mixed));
  EXPECT_THAT(error_of<RemoteUnavailable>(
                  [&] { intruder.connect_remote("127.0.0.1", server.port, "add_relu"); }),
              HasSubstr("cannot reach a troupe node"));
  // A client that trusts only the other CA refuses the server.
  Core wary(with_tls(rogue.issue("wary")));
  EXPECT_THAT(error_of<RemoteUnavailable>(
                  [&] { wary.connect_remote("127.0.0.1", server.port, "add_relu"); }),
              HasSubstr("cannot reach a troupe node"));
  // The server keeps serving the clients it trusts.
  Core client(with_tls(trusted.issue("client")));
  CompiledModel remote = client.connect_remote("127.0.0.1", server.port, "add_relu");
  EXPECT_EQ(run_checked(remote, 50, 4, 1), 0);
}

TEST(Tls, APlainClientGetsNothingFromATlsNode) {
  Pki pki("plain");
  ServingNode server(with_tls(pki.issue("server")));
  Core plain(NodeOptions{});
  auto attempt = std::async(std::launch::async, [&] {
    return error_of<RemoteUnavailable>(
        [&] { plain.connect_remote("127.0.0.1", server.port, "add_relu"); });
  });
  ASSERT_EQ(attempt.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "a plain connection to a TLS node hung";
  EXPECT_THAT(attempt.get(), HasSubstr("cannot reach a troupe node"));
}

TEST(Tls, IncompleteOrUnreadableCertificatesAreNamed) {
  Pki pki("files");
  TlsOptions tls = pki.issue("node");
  TlsOptions no_key = tls;
  no_key.key.clear();
  EXPECT_THAT(error_of<InvalidArgument>([&] { Core core(with_tls(no_key)); }),
              HasSubstr("the key file is not set"));
  TlsOptions missing = tls;
  missing.ca_file = pki.path("nowhere.pem");
  EXPECT_THAT(error_of<InvalidArgument>([&] { Core core(with_tls(missing)); }),
              HasSubstr("cannot read the CA file '" + pki.path("nowhere.pem") + "'"));
}

// A TLS link that ends (a peer gone, a handshake refused) must not take the node's other links
// with it: every link of a node shares the middleman's thread, and OpenSSL keeps its errors per
// thread.
TEST(Tls, AReplicaLostUnderLoadLeavesTheOtherLinkUp) {
  Pki pki("lost");
  ServingNode a(with_tls(pki.issue("a")));
  auto b = std::make_unique<ServingNode>(with_tls(pki.issue("b")));
  Core client(with_tls(pki.issue("client")));
  CompiledModel model = client.connect_replicas("add_relu", {a.endpoint(), b->endpoint()});
  std::vector<std::string> errors;
  std::thread killer([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (b->model.counters().success < 300 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    b.reset();
  });
  const int failed = run_checked(model, 6000, 16, 3, &errors);
  killer.join();
  EXPECT_EQ(failed, 0) << (errors.empty() ? "" : errors[0]);
  EXPECT_EQ(model.get_property(props::remote_replicas_lost).as_int(), 1);
}

TEST(Tls, RefusedHandshakesLeaveEstablishedClientsServed) {
  Pki trusted("trusted"), rogue("rogue");
  ServingNode server(with_tls(trusted.issue("server")));
  Core client(with_tls(trusted.issue("client")));
  CompiledModel remote = client.connect_remote("127.0.0.1", server.port, "add_relu");
  std::atomic<bool> done{false};
  std::thread intruders([&] {
    TlsOptions mixed = rogue.issue("intruder");
    mixed.ca_file = trusted.path("ca.pem");
    for (int i = 0; i < 20 && !done; ++i) {
      Core intruder(with_tls(mixed));
      try {
        intruder.connect_remote("127.0.0.1", server.port, "add_relu");
      } catch (const RemoteUnavailable&) {
      }
    }
  });
  std::vector<std::string> errors;
  const int failed = run_checked(remote, 4000, 8, 2, &errors);
  done = true;
  intruders.join();
  EXPECT_EQ(failed, 0) << (errors.empty() ? "" : errors[0]);
}
