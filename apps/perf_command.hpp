#pragma once

// `troupe perf`: a perf_analyzer-style load client for a KServe v2 server (HTTP or gRPC).

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace troupe::apps {

struct PerfOptions {
  std::string url;  // HOST[:PORT]; empty: 127.0.0.1, port 8000 (HTTP) or 8001 (gRPC)
  std::string model;
  std::string version;
  std::string protocol = "http";        // http | grpc
  bool binary = false;                  // HTTP: binary tensor extension instead of JSON data
  std::string concurrency_range = "1";  // START[:END[:STEP]], STEP like 2x (doubling) or +2
  double seconds = 5;                   // per concurrency level
  std::vector<std::string> inputs;      // NAME=FILE.npy; others random
  std::string csv;                      // write the table as CSV
  std::string svg;                      // throughput-vs-latency curve
  long long max_requests = 10'000'000;  // per level, a bound besides time
  std::string http_url;                 // gRPC: HOST:PORT of the server's HTTP side, for statistics
  double warmup_seconds = 0.5;          // per level, before measuring (at most a fifth of -t)
  double request_timeout = 30;          // seconds before one request counts as failed
};

CLI::App* add_perf_command(CLI::App& app, PerfOptions& options);

/// Runs the load; returns the process exit code.
int run_perf(const PerfOptions& options);

}  // namespace troupe::apps
