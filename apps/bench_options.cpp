#include "apps/bench_options.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

namespace troupe::apps {

namespace {

// The time limit when neither -t nor -niter is given.
constexpr double default_time_limit_s = 5.0;

}  // namespace

bool has_time_limit(const BenchOptions& o) {
  return o.time_s > 0 || o.niter == 0;
}

double time_limit_s(const BenchOptions& o) {
  return o.time_s > 0 ? o.time_s : (o.niter == 0 ? default_time_limit_s : 0.0);
}

CLI::App* add_bench_command(CLI::App& app, BenchOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Run a model with several requests in flight and report throughput, latency and what each "
      "pipeline stage did (count, time, queue wait, occupancy, overlap, bottleneck).");
  cmd->add_option("-m,--model", o.model_path,
                  "Model file to run (see `troupe info` for the formats), or a compiled .blob "
                  "from `troupe compile`. Default: the embedded CNN, image f32[1,3,32,32] -> "
                  "probabilities f32[1,10]")
      ->option_text("PATH");
  cmd->add_option("--remote", o.remote,
                  "Benchmark the model -m NAME that the node at HOST:PORT publishes (troupe "
                  "serve --actor-port) through a remote compiled model; the round trip is the "
                  "execute stage. Repeat for replicas on several nodes")
      ->option_text("HOST:PORT");
  cmd->add_option("--local-replica", o.local_replica,
                  "With --remote: compile this model file here too (-nstreams/-nthreads apply) "
                  "and use it as one more replica")
      ->option_text("PATH");
  cmd->add_option("--tls-cert", o.tls_cert, "With --remote: this node's PEM certificate");
  cmd->add_option("--tls-key", o.tls_key, "With --remote: its PEM private key");
  cmd->add_option("--tls-ca", o.tls_ca,
                  "With --remote: PEM CA file the server's certificate must chain to");
  cmd->add_option("-d,--device", o.device, "Device to compile for (default CPU)")
      ->option_text("NAME");
  cmd->add_option("--hint", o.hint,
                  "Performance hint: 'throughput' (a stream per core, several requests in "
                  "flight; the default) or 'latency' (one stream, one request)")
      ->option_text("latency|throughput")
      ->check(CLI::IsMember({"latency", "throughput"}, CLI::ignore_case));
  cmd->add_option("--nireq", o.nireq,
                  "Number of infer requests kept in flight. Default: the compiled model's "
                  "OPTIMAL_NUMBER_OF_INFER_REQUESTS")
      ->option_text("N")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--nstreams", o.nstreams,
                  "Number of execute streams (NUM_STREAMS). Default: chosen by the hint")
      ->option_text("N")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--nthreads", o.nthreads,
                  "Total compute threads, shared by the streams (INFERENCE_NUM_THREADS). "
                  "Default: every core")
      ->option_text("N")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("-t,--time", o.time_s,
                  "Run for SECONDS (default 5 when --niter is not given; with both, whichever "
                  "limit comes first)")
      ->option_text("SECONDS")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            char* end = nullptr;
            const double seconds = std::strtod(value.c_str(), &end);
            if (end == value.c_str() || *end != '\0' || !(seconds > 0))
              return "expected a positive number of seconds, got '" + value + "'";
            return {};
          },
          "", "positive seconds"));
  cmd->add_option("--niter", o.niter,
                  "Run N requests after the first inference (with -t, whichever limit comes first)")
      ->option_text("N")
      ->check(CLI::Range(int64_t{1}, INT64_MAX));
  cmd->add_flag("--pc,--perf-counts", o.perf_counts,
                "Enable PERF_COUNT and print per-op counters averaged over all runs");
  cmd->add_option("--pcsort", o.pc_sort,
                  "Order of the per-op counters (turns on --pc): 'sort' by real time, descending; "
                  "'no_sort' in execution order (the default); 'simple_sort' sorted, ops with zero "
                  "time hidden")
      ->option_text("sort|no_sort|simple_sort")
      ->check(CLI::IsMember({"sort", "no_sort", "simple_sort"}));
  cmd->add_option("--exec_graph_path", o.exec_graph_path,
                  "Write the runtime (execution) graph to FILE as JSON: each node's name, layer "
                  "type, execution order, implementation, original names and its input/output "
                  "values with shapes")
      ->option_text("FILE");
  cmd->add_option("--infer_precision", o.infer_precision,
                  "Inference precision (INFERENCE_PRECISION_HINT): f32, or bf16 where the CPU "
                  "supports it (falls back to f32 otherwise). Default: the device's")
      ->option_text("f32|bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
  cmd->add_option("--load_config", o.load_config,
                  "JSON file of compile properties per device, as benchmark_app's: "
                  "{\"CPU\": {\"max_batch_size\": 32, \"max_queue_delay_microseconds\": 500}}. "
                  "Any property, the scheduler's included; it overrides the other flags")
      ->option_text("FILE.json")
      ->check(CLI::ExistingFile);
  cmd->add_option("--auto_batch", o.auto_batch,
                  "Automatic batching (AUTO_BATCH_MAX_SIZE): up to N requests waiting at the same "
                  "stream run as one batch along the leading dimension. Only for models whose "
                  "inputs and outputs all have a dynamic leading dimension")
      ->option_text("N")
      ->check(CLI::Range(1, 256));
  cmd->add_flag("--reshape", o.reshape,
                "Compile the model with its inputs made static in the shapes -shape/-b give "
                "(remaining dynamic dimensions 1), as benchmark_app's -shape does, instead of "
                "compiling it dynamic and binding those shapes per request");
  cmd->add_option("--cache_dir", o.cache_dir,
                  "Directory for the compiled-model cache, passed to the device as its CACHE_DIR "
                  "property")
      ->option_text("DIR");
  cmd->add_option("-b,--batch", o.batch,
                  "Batch: the first dimension of every input, for models whose first dimension "
                  "is dynamic. Throughput counts each batch element")
      ->option_text("N")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--shape", o.shape,
                  "Shapes to run dynamic inputs with, e.g. \"image[1,3,224,224]\" or "
                  "\"a[1,8],b[1,4]\" ([...] alone names the only input)")
      ->option_text("SHAPES");
  cmd->add_option("-i,--input", o.input_files,
                  "An input's data from a .npy file, for every request (repeat for several "
                  "inputs; the others get generated values). Its shape is the file's, as if "
                  "given by -shape. For inputs generated values do not fit: token ids or "
                  "categories for tables of fewer than 10 rows, offsets, coordinates")
      ->option_text("NAME=FILE.npy");
  cmd->add_option("--ip", o.input_precision,
                  "Element type of the input tensors the caller sets (e.g. u8); converted to the "
                  "model's type in the preprocess stage")
      ->option_text("TYPE");
  cmd->add_option("--op", o.output_precision,
                  "Element type the outputs are returned in (e.g. f16); converted in the "
                  "postprocess stage")
      ->option_text("TYPE");
  cmd->add_option("--mean_values", o.mean_values,
                  "Per-channel mean subtracted in the preprocess stage, e.g. "
                  "\"image[123.7,116.3,103.5]\" ([...] alone names the only input)")
      ->option_text("VALUES");
  cmd->add_option("--scale_values", o.scale_values,
                  "Per-channel scale the input is divided by after the mean, e.g. "
                  "\"image[58.4,57.1,57.4]\"")
      ->option_text("VALUES");
  cmd->add_option(
      "--trace", o.trace_path,
      "Write a Chrome Trace Event / Perfetto JSON of the run to FILE: a track per stage "
      "and execute stream, each request's stages, flow arrows, per-op spans with --pc");
  cmd->add_option("--timeline", o.timeline_path,
                  "Write an SVG picture of stage occupancy over time to FILE");
  cmd->add_option("--report", o.report,
                  "Write every printed figure to FILE as JSON (the only report type is 'json')")
      ->option_text("json FILE")
      ->expected(2);
  cmd->parse_complete_callback([&o, cmd] {
    // As in benchmark_app, asking for an order of the counters asks for the counters.
    if (cmd->count("--pcsort") > 0) o.perf_counts = true;
    if (!o.report.empty() && o.report[0] != "json")
      throw CLI::ValidationError("--report", "report type '" + o.report[0] +
                                                 "' is not supported (use: --report json FILE)");
  });
  return cmd;
}

}  // namespace troupe::apps
