#include "apps/serve_command.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/default_model.hpp"
#include "server/grpc/grpc_frontend.hpp"
#include "server/http/http_frontend.hpp"
#include "server/metrics/metrics.hpp"
#include "server/model_repository.hpp"
#include "server/serve_error.hpp"
#include "server/server_context.hpp"
#include "troupe/actor_interface.hpp"
#include "troupe/core.hpp"

namespace troupe::apps {

namespace {

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "::1" || host == "localhost" || host.rfind("127.", 0) == 0;
}

// Written once every port listens, then renamed into place, so a reader never sees half a file.
void write_ready_file(const std::string& path, int http, int grpc, int metrics, int actor) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << nlohmann::json{{"http_port", http},
                          {"grpc_port", grpc},
                          {"metrics_port", metrics},
                          {"actor_port", actor},
                          {"pid", static_cast<int>(getpid())}}
               .dump()
        << "\n";
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace

CLI::App* add_serve_command(CLI::App& app, ServeOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve models over the Open Inference Protocol (KServe v2): HTTP/REST, gRPC and "
      "Prometheus metrics");
  cmd->add_option("--model-repository", o.model_repository,
                  "Folder of models: NAME/VERSION/model.{onnx,troupe,blob}, optional "
                  "NAME/config.json of compile properties");
  cmd->add_option("-m,--model", o.models, "NAME=PATH: serve one model file as NAME (repeatable)");
  cmd->add_option("--host", o.host, "Address to bind (default loopback only)");
  cmd->add_option("--http-port", o.http_port, "HTTP port (0: any free port, -1: no HTTP)");
  cmd->add_option("--grpc-port", o.grpc_port, "gRPC port (0: any free port, -1: no gRPC)");
  cmd->add_option("--metrics-port", o.metrics_port,
                  "Prometheus /metrics port (0: any free port, -1: no metrics)");
  cmd->add_option("--tls-cert", o.tls_cert, "PEM certificate: serve HTTPS and gRPC over TLS");
  cmd->add_option("--tls-key", o.tls_key, "PEM private key of --tls-cert");
  cmd->add_option("--actor-port", o.actor_port,
                  "Publish every model's typed actor on this port (CAF middleman; 0: any free "
                  "port). Off loopback it needs --tls-cert, --tls-key and --tls-ca");
  cmd->add_option("--tls-ca", o.tls_ca,
                  "PEM CA file: the actor port accepts only peers with a certificate it signed");
  cmd->add_option("--http-threads", o.http_threads, "Network I/O threads of the HTTP server")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--ready-file", o.ready_file,
                  "Write {\"http_port\",\"grpc_port\",\"metrics_port\",\"pid\"} here once serving");
  cmd->add_option("-p,--property", o.properties,
                  "KEY=VALUE compile property for every model (config.json overrides)");
  cmd->add_option("--max-body-mb", o.max_body_mb, "Largest request body accepted, MiB")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-tensor-elements", o.max_tensor_elements,
                  "Largest input tensor accepted, in elements")
      ->check(CLI::Range(1ll, 1ll << 40));
  cmd->footer(
      "Without --model-repository or -m, serves the embedded default CNN as model 'default'.\n"
      "SIGTERM or SIGINT: stop accepting, answer every request already received, exit 0.\n"
      "Example: troupe serve -m resnet=resnet50.onnx; curl localhost:8000/v2/models/resnet");
  return cmd;
}

int run_serve(const ServeOptions& o) {
  using namespace troupe::server;
  // Signals are taken by sigwait below: block them before any thread (CAF, Asio, gRPC) exists so
  // every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (o.tls_cert.empty() != o.tls_key.empty()) {
    std::cerr << "troupe serve: --tls-cert and --tls-key go together\n";
    return 2;
  }
  if (!is_loopback(o.host) && o.tls_cert.empty())
    std::cerr << "troupe serve: warning: serving on " << o.host
              << " without TLS: anyone on the network can read and send tensors\n";
  // The actor port carries tensors between CAF nodes: off loopback, only with both sides
  // verified. Checked before anything listens.
  const bool actor_tls = !o.tls_ca.empty();
  if (o.actor_port >= 0 && !is_loopback(o.host) &&
      (o.tls_cert.empty() || o.tls_key.empty() || o.tls_ca.empty())) {
    std::cerr << "troupe serve: refusing --actor-port on " << o.host
              << " without --tls-cert, --tls-key and --tls-ca: CAF would fall back to an "
                 "anonymous cipher that anyone on the path can read and inject into\n";
    return 2;
  }
  if (actor_tls && o.tls_cert.empty()) {
    std::cerr << "troupe serve: --tls-ca needs --tls-cert and --tls-key\n";
    return 2;
  }
  try {
    std::unique_ptr<Core> networked;
    if (o.actor_port >= 0) {
      NodeOptions node;
      if (actor_tls) node.tls = TlsOptions{o.tls_cert, o.tls_key, o.tls_ca, ""};
      networked = std::make_unique<Core>(node);
    } else {
      networked = std::make_unique<Core>();
    }
    Core& core = *networked;
    // A server has many clients: each model is compiled for throughput (several streams) and its
    // pipeline takes 64 requests (and queues 4x that) before it answers "queue full".
    // --property or a model's config.json may say otherwise.
    AnyMap defaults{{"PERFORMANCE_HINT", "THROUGHPUT"}, {"MAX_REQUESTS_IN_FLIGHT", 64}};
    for (const auto& kv : o.properties) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::cerr << "troupe serve: --property '" << kv << "' is not KEY=VALUE\n";
        return 2;
      }
      defaults[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    ModelRepository repository(core, o.model_repository, defaults);
    for (const auto& spec : o.models) {
      const auto eq = spec.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::cerr << "troupe serve: -m '" << spec << "' is not NAME=PATH\n";
        return 2;
      }
      repository.add_model(spec.substr(0, eq), spec.substr(eq + 1));
    }
    if (o.model_repository.empty() && o.models.empty())
      repository.add_model("default", make_default_model(Shape::dynamic));
    repository.load_all();
    for (const auto& row : repository.index())
      std::cerr << "troupe serve: model '" << row.name << "'"
                << (row.version.empty() ? "" : " version " + row.version) << ": " << row.state
                << (row.reason.empty() ? "" : " (" + row.reason + ")") << "\n";

    ServerContext context{actor_system_of(core), repository, {}};
    context.limits.max_body_bytes = o.max_body_mb << 20;
    context.limits.max_tensor_elements = o.max_tensor_elements;
    const TlsFiles tls{o.tls_cert, o.tls_key};
    std::optional<Metrics> metrics;
    std::optional<HttpFrontend> http;
    std::optional<GrpcFrontend> grpc;
    if (o.metrics_port >= 0) metrics.emplace(repository, o.host, o.metrics_port);
    if (o.http_port >= 0) http.emplace(context, o.host, o.http_port, o.http_threads, tls);
    if (o.grpc_port >= 0) grpc.emplace(context, o.host, o.grpc_port, tls);
    int actor_port = -1;
    if (o.actor_port >= 0) {
      std::map<std::string, CompiledModel> published;
      for (const auto& served : repository.loaded())
        published[served->name()] = repository.find(served->name())->compiled();
      actor_port = core.publish(published, static_cast<uint16_t>(o.actor_port), o.host);
    }
    const int http_port = http ? http->port() : -1;
    const int grpc_port = grpc ? grpc->port() : -1;
    const int metrics_port = metrics ? metrics->port() : -1;
    std::cerr << "troupe serve: listening on " << o.host << (tls.enabled() ? " with TLS" : "")
              << ": HTTP " << http_port << ", gRPC " << grpc_port << ", metrics " << metrics_port
              << ", actors " << actor_port << (actor_tls ? " (TLS)" : "") << "\n";
    if (!o.ready_file.empty())
      write_ready_file(o.ready_file, http_port, grpc_port, metrics_port, actor_port);

    int received = 0;
    sigwait(&signals, &received);
    std::cerr << "troupe serve: " << (received == SIGINT ? "SIGINT" : "SIGTERM") << ": draining\n";
    context.accepting = false;
    if (http) http->shutdown();
    if (grpc) grpc->shutdown();
    repository.unload_all();  // waits for requests still in the pipelines
    std::cerr << "troupe serve: stopped\n";
    return 0;
  } catch (const ServeError& e) {
    std::cerr << "troupe serve: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "troupe serve: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace troupe::apps
