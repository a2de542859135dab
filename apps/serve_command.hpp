#pragma once

// `troupe serve`: the Open Inference Protocol (KServe v2) over HTTP and gRPC, with a model
// repository and Prometheus metrics.

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace troupe::apps {

struct ServeOptions {
  std::string model_repository;     // DIR/NAME/VERSION/model.{onnx,troupe,blob}
  std::vector<std::string> models;  // NAME=PATH
  std::string host = "127.0.0.1";
  int http_port = 8000;                 // 0: choose a free port; -1: no HTTP
  int grpc_port = 8001;                 // 0: choose; -1: no gRPC
  int metrics_port = 8002;              // 0: choose; -1: no metrics
  std::string tls_cert, tls_key;        // PEM files: HTTPS and gRPC over TLS (and the actor port)
  std::string tls_ca;                   // PEM file: CA of the peers on the actor port
  int actor_port = -1;                  // CAF middleman port publishing the models; -1: none
  int http_threads = 2;                 // network I/O threads (never run inference)
  std::string ready_file;               // written with the bound ports once serving
  std::vector<std::string> properties;  // KEY=VALUE compile properties for every model
  size_t max_body_mb = 256;
  long long max_tensor_elements = 1ll << 28;
};

CLI::App* add_serve_command(CLI::App& app, ServeOptions& options);

/// Serves until SIGTERM/SIGINT; returns the process exit code.
int run_serve(const ServeOptions& options);

}  // namespace troupe::apps
