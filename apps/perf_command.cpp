#include "apps/perf_command.hpp"

#include <algorithm>
#include <exception>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "apps/perf_concurrency.hpp"
#include "apps/perf_endpoint.hpp"
#include "apps/perf_error.hpp"
#include "apps/perf_grpc_client.hpp"
#include "apps/perf_http_client.hpp"
#include "apps/perf_inputs.hpp"
#include "apps/perf_load.hpp"
#include "apps/perf_report.hpp"
#include "apps/perf_server_stats.hpp"
#include "apps/perf_svg.hpp"

namespace troupe::apps {

namespace {

std::string describe_inputs(const std::vector<InputData>& inputs) {
  std::string out;
  for (const InputData& in : inputs)
    out += (out.empty() ? "" : ", ") + describe(in.spec) +
           (in.file.empty() ? " random" : " from " + in.file);
  return out.empty() ? "none" : out;
}

const char* protocol_name(const PerfOptions& o) {
  return o.protocol == "grpc" ? "gRPC" : o.binary ? "HTTP (binary tensors)" : "HTTP (JSON)";
}

std::unique_ptr<InferTransport> make_transport(const PerfOptions& o, const Endpoint& endpoint,
                                               const ModelMetadata& metadata,
                                               const std::vector<InputData>& inputs) {
  if (o.protocol == "grpc")
    return make_grpc_transport(endpoint, o.model, o.version, inputs, metadata.outputs,
                               o.request_timeout);
  return make_http_transport(endpoint, o.model, o.version,
                             make_http_infer_body(inputs, metadata.outputs, o.binary),
                             metadata.outputs, o.request_timeout);
}

// The server's breakdown comes from the HTTP statistics extension; over gRPC only when the
// server's HTTP side is named. Empty, with `why` set, when the server does not give them.
StatsReader make_stats_reader(const PerfOptions& o, const Endpoint& endpoint, std::string& why) {
  if (o.protocol == "grpc" && o.http_url.empty()) {
    why = "over gRPC without --http-url";
    return {};
  }
  const Endpoint http = o.protocol == "grpc" ? parse_endpoint(o.http_url, 8000) : endpoint;
  if (!read_server_stats(http, o.model, o.version, o.request_timeout, &why)) return {};
  return [http, o] { return read_server_stats(http, o.model, o.version, o.request_timeout); };
}

int perf(const PerfOptions& o) {
  const bool grpc = o.protocol == "grpc";
  if (grpc && o.binary)
    throw PerfError("--binary is for HTTP; gRPC always sends tensors as raw bytes");
  const std::vector<int> levels = parse_concurrency_range(o.concurrency_range);
  // perf_analyzer's defaults: HTTP on 8000, gRPC on 8001.
  const Endpoint endpoint = parse_endpoint(o.url.empty() ? "127.0.0.1" : o.url, grpc ? 8001 : 8000);
  const ModelMetadata metadata =
      grpc ? grpc_model_metadata(endpoint, o.model, o.version, o.request_timeout)
           : http_model_metadata(endpoint, o.model, o.version, o.request_timeout);
  const std::vector<InputData> inputs = make_inputs(metadata.inputs, o.inputs);
  std::unique_ptr<InferTransport> transport = make_transport(o, endpoint, metadata, inputs);
  std::string no_stats_reason;
  const StatsReader stats = make_stats_reader(o, endpoint, no_stats_reason);

  const double warmup = std::min(o.warmup_seconds, o.seconds / 5);
  std::cout << "troupe perf: model " << o.model
            << (o.version.empty() ? "" : " version " + o.version) << " at " << endpoint.text()
            << " over " << protocol_name(o) << "\n"
            << "  inputs: " << describe_inputs(inputs) << "\n"
            << fmt::format("  {:g} s per concurrency level after {:g} s of warm-up", o.seconds,
                           warmup)
            << (o.max_requests == PerfOptions{}.max_requests
                    ? ""
                    : fmt::format(", at most {} requests each", o.max_requests))
            << "\n";
  if (!stats) std::cout << "  server statistics: not available (" << no_stats_reason << ")\n";

  // One request first: a server that refuses the inputs is reported before any load.
  transport->open(1);
  LoadSchedule first(o.request_timeout, 1);
  transport->run(first);
  const PhaseResult probe = first.result();
  if (probe.ok == 0) throw PerfError("the first inference failed: " + probe.first_error);

  std::vector<LevelRow> rows;
  for (int c : levels) {
    const LevelRow row =
        summarize(run_level(*transport, c, warmup, o.seconds, o.max_requests, stats));
    std::cerr << fmt::format("  concurrency {}: {:.1f} infer/s, p50 {:.0f} us, p99 {:.0f} us{}\n",
                             c, row.throughput, row.p50_us, row.p99_us,
                             row.errors ? fmt::format(", {} errors", row.errors) : "");
    rows.push_back(row);
  }

  std::cout << "\n";
  print_table(std::cout, rows);
  if (!o.csv.empty()) write_csv(o.csv, rows);
  if (!o.svg.empty())
    write_svg(o.svg, rows,
              fmt::format("{} over {}: p99 latency vs throughput", o.model, protocol_name(o)));

  uint64_t errors = 0;
  std::string first_error;
  for (const LevelRow& r : rows) {
    errors += r.errors;
    if (first_error.empty()) first_error = r.first_error;
  }
  if (errors == 0) return 0;
  std::cerr << "troupe perf: error: " << errors << " request(s) failed; the first: " << first_error
            << "\n";
  return 1;
}

}  // namespace

CLI::App* add_perf_command(CLI::App& app, PerfOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "perf",
      "Load a KServe v2 (Open Inference Protocol) server, as Triton's perf_analyzer does: at each "
      "concurrency level C, C requests in flight back to back; reports throughput, latency "
      "percentiles and the server's own time breakdown (statistics extension).");
  cmd->add_option("-u,--url", o.url,
                  "Server address (default 127.0.0.1:8000 for HTTP, 127.0.0.1:8001 for gRPC)")
      ->option_text("HOST:PORT");
  cmd->add_option("-m,--model-name", o.model, "Model to load")->option_text("NAME")->required();
  cmd->add_option("-x,--model-version", o.version, "Model version (default: the server's choice)")
      ->option_text("V");
  cmd->add_option("-i,--protocol", o.protocol, "Protocol: http (default) or grpc")
      ->option_text("http|grpc")
      ->check(CLI::IsMember({"http", "grpc"}, CLI::ignore_case));
  cmd->add_flag("--binary", o.binary,
                "HTTP: send and receive tensors with the binary tensor data extension instead of "
                "JSON lists");
  cmd->add_option("--concurrency-range", o.concurrency_range,
                  "Concurrency levels START[:END[:STEP]]; STEP N adds N, Nx multiplies, e.g. "
                  "1:64:2x (default 1)")
      ->option_text("RANGE");
  cmd->add_option("-t,--time", o.seconds, "Measured seconds per concurrency level (default 5)")
      ->option_text("SECONDS")
      ->check(CLI::Range(0.001, 86400.0));
  cmd->add_option("--warmup", o.warmup_seconds,
                  "Warm-up seconds before each level's measurement (default 0.5, at most a fifth "
                  "of -t; 0: none)")
      ->option_text("SECONDS")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--max-requests", o.max_requests,
                  "At most N requests per level and phase besides the time limit")
      ->option_text("N")
      ->check(CLI::Range(1LL, 1'000'000'000LL));
  cmd->add_option("--input", o.inputs,
                  "Send the array of an .npy file as input NAME (repeatable; others get seeded "
                  "random data, dynamic dimensions 1)")
      ->option_text("NAME=FILE.npy");
  cmd->add_option("--csv", o.csv, "Also write the table to FILE as CSV")->option_text("FILE");
  cmd->add_option("--svg", o.svg, "Draw p99 latency against throughput into FILE (SVG)")
      ->option_text("FILE");
  cmd->add_option("--http-url", o.http_url,
                  "gRPC: the server's HTTP address, to read its statistics from")
      ->option_text("HOST:PORT");
  cmd->add_option("--timeout", o.request_timeout,
                  "Seconds before a request without an answer counts as failed (default 30)")
      ->option_text("SECONDS")
      ->check(CLI::Range(0.001, 86400.0));
  cmd->footer(
      "Example: troupe serve -m resnet=resnet50.onnx &  troupe perf -m resnet "
      "--concurrency-range 1:16:2x -t 10 --csv perf.csv --svg perf.svg\n"
      "Exit code 1 when the server cannot be reached, the model is unknown or any request "
      "failed.");
  return cmd;
}

int run_perf(const PerfOptions& options) {
  try {
    return perf(options);
  } catch (const std::exception& e) {
    std::cerr << "troupe perf: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace troupe::apps
