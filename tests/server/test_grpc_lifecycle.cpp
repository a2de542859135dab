// The gRPC front end's life: binding (a free port, a taken one), TLS, shutdown and destruction.

#include <gmock/gmock.h>

#include <cstdlib>
#include <fstream>

#include "grpc_test_server.hpp"
#include "server/serve_error.hpp"

using namespace troupe;
using namespace troupe::test::grpc_server;
using ::testing::HasSubstr;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST(GrpcFrontendLifecycle, ATakenPortOrABadPortThrows) {
  TestServer server;
  const std::string message = troupe::test::error_of<server::ServeError>([&] {
    server::GrpcFrontend second(server.context, "127.0.0.1", server.frontend->port(), {});
  });
  EXPECT_THAT(message, HasSubstr("127.0.0.1:" + std::to_string(server.frontend->port())));
  EXPECT_THAT(troupe::test::error_of<server::ServeError>(
                  [&] { server::GrpcFrontend bad(server.context, "127.0.0.1", 70000, {}); }),
              HasSubstr("70000"));
  // The first server is untouched.
  inference::ServerLiveResponse live;
  EXPECT_TRUE(server.stub->ServerLive(bounded_context().get(), {}, &live).ok());
}

TEST(GrpcFrontendLifecycle, DestroyingWithoutShutdownStopsServing) {
  TestServer server;
  {
    server::GrpcFrontend other(server.context, "127.0.0.1", 0, {});
    EXPECT_GT(other.port(), 0);
    EXPECT_NE(other.port(), server.frontend->port());
  }
  server.frontend->shutdown();
  server.frontend->shutdown();
  server.frontend.reset();  // the destructor after shutdown
}

TEST(GrpcFrontendLifecycle, MissingTlsFilesAreNamed) {
  TestServer server;
  const std::string missing = (server.folder.path() / "missing.pem").string();
  EXPECT_THAT(troupe::test::error_of<server::ServeError>([&] {
                server::GrpcFrontend tls(server.context, "127.0.0.1", 0, {missing, missing});
              }),
              HasSubstr("'" + missing + "'"));
  EXPECT_THAT(troupe::test::error_of<server::ServeError>([&] {
                server::GrpcFrontend tls(server.context, "127.0.0.1", 0, {missing, ""});
              }),
              HasSubstr("private key"));
}

TEST(GrpcFrontendLifecycle, ServesOverTls) {
  TempFolder folder;
  const fs::path cert = folder.path() / "cert.pem", key = folder.path() / "key.pem";
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=DNS:localhost -keyout " +
      key.string() + " -out " + cert.string() + " >/dev/null 2>&1";
  if (std::system(command.c_str()) != 0) GTEST_SKIP() << "openssl cannot make a certificate";

  TestServer server({}, {cert.string(), key.string()});
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = read_file(cert);
  auto stub = server.make_stub(grpc::SslCredentials(options), "localhost");
  inference::ServerMetadataResponse metadata;
  const grpc::Status status = stub->ServerMetadata(bounded_context().get(), {}, &metadata);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(metadata.name(), "troupe");

  // A plaintext client cannot talk to it.
  auto plain = server.make_stub(grpc::InsecureChannelCredentials());
  EXPECT_FALSE(plain->ServerMetadata(bounded_context(5).get(), {}, &metadata).ok());
}
