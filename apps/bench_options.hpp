#pragma once

// `troupe bench`'s options and their command-line flags (benchmark_app's names).

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace troupe::apps {

struct BenchOptions {
  std::string model_path;  // empty: the embedded default model; with --remote, the model's name
  std::vector<std::string> remote;  // HOST:PORT of nodes' actor ports (troupe serve --actor-port)
  std::string local_replica;        // with --remote: also run this model file here as a replica
  std::string tls_cert, tls_key, tls_ca;  // this node's certificate, key and the peers' CA
  std::string device = "CPU";
  std::string hint = "throughput";
  int nireq = 0;     // 0: the compiled model's OPTIMAL_NUMBER_OF_INFER_REQUESTS
  int nstreams = 0;  // 0: from the hint
  int nthreads = 0;  // 0: every core
  double time_s = 0;
  int64_t niter = 0;
  bool perf_counts = false;
  std::string pc_sort = "no_sort";  // sort | no_sort | simple_sort (per-op counter order)
  std::string exec_graph_path;      // JSON of the runtime model (execution graph)
  std::string infer_precision;      // empty: the device default; f32 | bf16
  std::string load_config;          // JSON {"CPU": {property: value}} applied over the other flags
  int auto_batch = 0;               // 0: the device default; else AUTO_BATCH_MAX_SIZE
  bool reshape = false;             // compile with the -shape/-b shapes made static
  std::string cache_dir;            // CACHE_DIR for compiled blobs
  int64_t batch = 0;                // 0: from the model (or -shape); else the first dimension
  std::string shape;                // "name[1,3,224,224],other[...]" or "[1,3,224,224]"
  std::vector<std::string> input_files;  // -i "NAME=FILE.npy": an input's data, every request
  std::string input_precision;           // -ip: element type the caller's input tensors have
  std::string output_precision;          // -op: element type the caller receives outputs in
  std::string mean_values;               // "name[123.7,116.3,103.5]" or "[...]": per-channel mean
  std::string scale_values;              // same form: per-channel scale (divisor)
  std::vector<std::string> report;       // {"json", FILE} when asked for
  std::string trace_path;                // Chrome Trace Event / Perfetto JSON of the run
  std::string timeline_path;             // SVG picture of stage occupancy
};

/// Adds the `bench` subcommand to `app`, parsing into `options`.
CLI::App* add_bench_command(CLI::App& app, BenchOptions& options);

/// Whether the measured phase stops at a time limit: -t, or the default when -niter is not given.
bool has_time_limit(const BenchOptions& options);

/// The measured phase's time limit in seconds; 0 when has_time_limit is false.
double time_limit_s(const BenchOptions& options);

}  // namespace troupe::apps
