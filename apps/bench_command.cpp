#include "apps/bench_command.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <numeric>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/compile_command.hpp"
#include "apps/default_model.hpp"
#include "engine/src/compiled_model_impl.hpp"
#include "engine/src/pipeline_stats.hpp"
#include "engine/src/trace_export.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/properties.hpp"

namespace troupe::apps {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Linear interpolation between closest ranks, as the pipeline statistics compute it.
double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(sorted.size() - 1, lo + 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] * (1 - frac) + sorted[hi] * frac;
}

std::string describe(const ValueInfo& v) {
  return fmt::format("{} {} {}", v.name, to_string(v.type), v.shape.to_string());
}

json value_json(const ValueInfo& v) {
  return {{"name", v.name}, {"type", std::string(to_string(v.type))}, {"shape", v.shape.dims()}};
}

// Inputs for a model read from a file: deterministic values in [0, 1) (or small integers),
// dynamic dimensions set to 1.
Tensor make_input(const ValueInfo& info, uint32_t seed, bool& had_dynamic) {
  std::vector<int64_t> dims = info.shape.dims();
  for (auto& d : dims) {
    if (d < 0) {
      d = 1;
      had_dynamic = true;
    }
  }
  const Shape shape(dims);
  const bool integral = info.type != ElementType::f32 && info.type != ElementType::f16 &&
                        info.type != ElementType::bf16 && info.type != ElementType::f64;
  std::vector<float> values(static_cast<size_t>(shape.element_count()));
  uint32_t state = seed * 2654435761u + 1;
  for (auto& v : values) {
    state = state * 1664525u + 1013904223u;
    const float u = static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
    v = integral ? std::floor(u * 10.0f) : u;
  }
  Tensor f32 = Tensor::from_vector<float>(shape, values);
  if (info.type == ElementType::f32) return f32;
  if (is_convertible(ElementType::f32, info.type)) return f32.convert(info.type);
  return Tensor(info.type, shape);  // zeros
}

struct LatencySummary {
  double median = 0, average = 0, min = 0, max = 0, p90 = 0, p99 = 0;
};

LatencySummary summarize(std::vector<double> ms) {
  LatencySummary s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  s.median = percentile(ms, 50);
  s.average = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  s.min = ms.front();
  s.max = ms.back();
  s.p90 = percentile(ms, 90);
  s.p99 = percentile(ms, 99);
  return s;
}

// Per-node counters averaged over every recorded run (PERF_COUNT).
struct OpCounter {
  std::string name, type, implementation;
  size_t runs = 0;
  double real_us = 0, cpu_us = 0;  // sums
};

std::vector<OpCounter> op_counters(const detail::CompiledModelImpl& impl,
                                   const std::vector<detail::RequestTrace>& traces) {
  const auto& graph = *impl.graph();
  const auto& nodes = graph.model->nodes();
  std::vector<OpCounter> out(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    out[n].name = nodes[n].name;
    out[n].type = nodes[n].op_type;
    out[n].implementation = n < graph.implementations.size() ? graph.implementations[n] : "?";
  }
  for (const auto& t : traces) {
    for (size_t n = 0; n < t.ops.size() && n < out.size(); ++n) {
      ++out[n].runs;
      out[n].real_us += static_cast<double>(t.ops[n].real_ns) / 1e3;
      out[n].cpu_us += static_cast<double>(t.ops[n].cpu_ns) / 1e3;
    }
  }
  return out;
}

// One completed run, handed from the callback actor to the driving thread.
struct Completion {
  size_t request = 0;
  int64_t end_ns = 0;
  std::exception_ptr error;
};

class CompletionQueue {
 public:
  void push(Completion c) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      items_.push_back(std::move(c));
    }
    cv_.notify_one();
  }
  Completion pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !items_.empty(); });
    Completion c = std::move(items_.front());
    items_.pop_front();
    return c;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Completion> items_;
};

std::string error_text(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown error";
  }
}

void print_row(const std::string& key, const std::string& value) {
  fmt::print("{:<26}{}\n", key, value);
}

int bench(const BenchOptions& o) {
  const bool time_limited = o.time_s > 0 || o.niter == 0;
  const double time_limit_s = o.time_s > 0 ? o.time_s : (o.niter == 0 ? 5.0 : 0.0);

  Core core;
  AnyMap config;
  config[props::performance_mode] = upper(o.hint);
  if (o.nstreams > 0) config[props::num_streams] = o.nstreams;
  if (o.nthreads > 0) config[props::inference_num_threads] = o.nthreads;
  if (o.perf_counts) config[props::enable_profiling] = true;

  const auto compile_start = Clock::now();
  // A model file is read and compiled, or imported when it is a compiled blob (troupe compile).
  CompiledModel compiled = o.model_path.empty()
                               ? core.compile_model(make_default_model(), o.device, config)
                               : load_compiled_model(core, o.model_path, o.device, config);
  const double compile_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - compile_start).count();

  const int streams = static_cast<int>(compiled.get_property(props::num_streams).as_int());
  const int threads =
      static_cast<int>(compiled.get_property(props::inference_num_threads).as_int());
  const int optimal =
      static_cast<int>(compiled.get_property(props::optimal_number_of_infer_requests).as_int());
  const int max_in_flight =
      static_cast<int>(compiled.get_property(props::max_requests_in_flight).as_int());
  const std::string hint = compiled.get_property(props::performance_mode).as_string();
  const std::string model_name = compiled.get_property(props::model_name).as_string();
  const int nireq = o.nireq > 0 ? o.nireq : optimal;
  std::string device_name;
  try {
    device_name = core.get_property(o.device, props::device_full_name).as_string();
  } catch (const Error&) {
  }

  // Requests and their inputs.
  bool had_dynamic = false;
  std::vector<InferRequest> requests;
  for (int i = 0; i < nireq; ++i) {
    InferRequest r = compiled.create_infer_request();
    for (const auto& in : compiled.inputs()) {
      if (o.model_path.empty())
        r.set_tensor(in.name,
                     make_default_input(1, default_model_seed + 1 + static_cast<uint32_t>(i)));
      else
        r.set_tensor(in.name, make_input(in, static_cast<uint32_t>(i), had_dynamic));
    }
    requests.push_back(std::move(r));
  }

  fmt::print("[ config ]\n");
  print_row("model", o.model_path.empty() ? model_name + " (embedded default model)"
                                          : model_name + " (" + o.model_path + ")");
  for (const auto& in : compiled.inputs()) print_row("  input", describe(in));
  for (const auto& out : compiled.outputs()) print_row("  output", describe(out));
  if (had_dynamic) print_row("  note", "dynamic input dimensions were set to 1");
  print_row("device", device_name.empty() ? o.device : o.device + " (" + device_name + ")");
  print_row("performance hint", hint);
  print_row("streams", std::to_string(streams));
  print_row("threads", fmt::format("{} ({} per stream)", threads, std::max(1, threads / streams)));
  print_row("infer requests (nireq)",
            fmt::format("{}{}", nireq, o.nireq > 0 ? "" : " (OPTIMAL_NUMBER_OF_INFER_REQUESTS)"));
  print_row("max requests in flight", std::to_string(max_in_flight) + " (pipeline credits)");
  std::string limit;
  if (time_limited) limit = fmt::format("{:g} s", time_limit_s);
  if (o.niter > 0) limit += (limit.empty() ? "" : " or ") + fmt::format("{} iterations", o.niter);
  print_row("limit", limit + (time_limited && o.niter > 0 ? ", whichever comes first" : ""));
  print_row("per-op counters", o.perf_counts ? "on (PERF_COUNT)" : "off");
  print_row("compile time", fmt::format("{:.2f} ms", compile_ms));

  // First inference, reported on its own: it pays one-time costs (buffers, kernel set-up).
  const auto first_start = Clock::now();
  requests[0].infer();
  const double first_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - first_start).count();
  fmt::print("\n[ first inference ]\n");
  print_row("first inference", fmt::format("{:.3f} ms", first_ms));
  std::fflush(stdout);

  auto& stats = compiled.impl()->context().stats;
  stats.reset();

  // Measured phase: every request loops start_async -> callback -> restart. The callback only
  // stamps the time and queues the completion; this thread restarts the request, because a
  // request cannot be restarted from inside its own callback.
  CompletionQueue queue;
  for (size_t i = 0; i < requests.size(); ++i)
    requests[i].set_callback([&queue, i](std::exception_ptr e) {
      queue.push({i, now_ns(), std::move(e)});
    });

  std::vector<int64_t> started_ns(requests.size(), 0);
  std::vector<double> latencies_ms;
  latencies_ms.reserve(o.niter > 0 ? static_cast<size_t>(o.niter) : 1u << 16);
  const int64_t begin_ns = now_ns();
  const int64_t deadline_ns =
      time_limited ? begin_ns + static_cast<int64_t>(time_limit_s * 1e9) : INT64_MAX;
  int64_t started = 0, in_flight = 0;
  std::exception_ptr first_error;
  size_t failed = 0;

  auto may_start = [&] {
    if (first_error) return false;
    if (o.niter > 0 && started >= o.niter) return false;
    return now_ns() < deadline_ns;
  };
  auto start = [&](size_t i) {
    started_ns[i] = now_ns();
    requests[i].start_async();
    ++started;
    ++in_flight;
  };

  for (size_t i = 0; i < requests.size() && may_start(); ++i) start(i);
  while (in_flight > 0) {
    Completion c = queue.pop();
    --in_flight;
    if (c.error) {
      ++failed;
      if (!first_error) first_error = c.error;
    } else {
      latencies_ms.push_back(static_cast<double>(c.end_ns - started_ns[c.request]) / 1e6);
    }
    if (may_start()) {
      try {
        requests[c.request].wait();  // returns once its callback has finished
      } catch (...) {
      }
      start(c.request);
    }
  }
  for (auto& r : requests) {
    try {
      r.wait();
    } catch (...) {
    }
  }

  // Until every request has come back, so a time-limited run never reports less than its limit.
  const int64_t end_ns = now_ns();
  const double duration_s = static_cast<double>(end_ns - begin_ns) / 1e9;
  const size_t count = latencies_ms.size();
  const double fps = duration_s > 0 ? static_cast<double>(count) / duration_s : 0;
  const LatencySummary lat = summarize(latencies_ms);
  const detail::PipelineSummary summary = stats.summary();

  fmt::print("\n[ results ]\n");
  print_row("count", fmt::format("{} requests in {:.3f} s ({} failed)", count, duration_s, failed));
  print_row("throughput", fmt::format("{:.2f} FPS", fps));
  print_row("latency median", fmt::format("{:.3f} ms", lat.median));
  print_row("latency average", fmt::format("{:.3f} ms", lat.average));
  print_row("latency min", fmt::format("{:.3f} ms", lat.min));
  print_row("latency max", fmt::format("{:.3f} ms", lat.max));
  print_row("latency p90", fmt::format("{:.3f} ms", lat.p90));
  print_row("latency p99", fmt::format("{:.3f} ms", lat.p99));

  fmt::print(
      "\n[ pipeline stages ] (per request; busy % = stage busy time / (wall time x workers))\n");
  fmt::print("{}", detail::format_summary(summary));
  print_row("mean requests in flight", fmt::format("{:.2f}", summary.mean_in_flight));
  print_row("stage overlap",
            fmt::format("{:.2f} (sum of stage busy time / wall time)", summary.stage_overlap));

  std::vector<OpCounter> ops;
  if (o.perf_counts) {
    ops = op_counters(*compiled.impl(), stats.traces());
    double total_real = 0;
    for (const auto& op : ops)
      if (op.runs) total_real += op.real_us / static_cast<double>(op.runs);
    fmt::print("\n[ per-op counters ] (averaged over runs)\n");
    fmt::print("{:<24} {:<20} {:<28} {:>8} {:>11} {:>11} {:>7}\n", "node", "type", "implementation",
               "runs", "real us", "cpu us", "%");
    for (const auto& op : ops) {
      const double runs = static_cast<double>(std::max<size_t>(op.runs, 1));
      const double real = op.real_us / runs;
      fmt::print("{:<24} {:<20} {:<28} {:>8} {:>11.2f} {:>11.2f} {:>7.1f}\n", op.name, op.type,
                 op.implementation, op.runs, real, op.cpu_us / runs,
                 total_real > 0 ? 100.0 * real / total_real : 0.0);
    }
  }

  if (!o.trace_path.empty()) {
    std::vector<std::string> op_names;
    for (const auto& node : compiled.impl()->graph()->model->nodes()) op_names.push_back(node.name);
    std::ofstream out(o.trace_path);
    out << detail::chrome_trace_json(stats.traces(), compiled.impl()->config().num_streams, op_names);
    if (!out) {
      std::cerr << "troupe bench: error: cannot write trace file '" << o.trace_path << "'\n";
      return 1;
    }
    fmt::print("\ntrace written to {} (open it in the Perfetto UI or chrome://tracing)\n",
               o.trace_path);
  }
  if (!o.timeline_path.empty()) {
    std::ofstream out(o.timeline_path);
    out << detail::timeline_svg(stats.traces(), compiled.impl()->config().num_streams);
    if (!out) {
      std::cerr << "troupe bench: error: cannot write timeline file '" << o.timeline_path << "'\n";
      return 1;
    }
    fmt::print("timeline written to {}\n", o.timeline_path);
  }

  if (!o.report.empty()) {
    json stages = json::array();
    for (const auto& st : summary.stages)
      stages.push_back({{"name", st.name},
                        {"count", st.count},
                        {"mean_us", st.mean_us},
                        {"p50_us", st.p50_us},
                        {"p90_us", st.p90_us},
                        {"p99_us", st.p99_us},
                        {"max_us", st.max_us},
                        {"queue_wait_mean_us", st.queue_wait_mean_us},
                        {"busy_us", st.busy_us},
                        {"occupancy", st.occupancy},
                        {"workers", st.workers}});
    json inputs = json::array(), outputs = json::array();
    for (const auto& in : compiled.inputs()) inputs.push_back(value_json(in));
    for (const auto& out : compiled.outputs()) outputs.push_back(value_json(out));
    json report = {{"config",
                    {{"model", model_name},
                     {"model_path", o.model_path.empty() ? json(nullptr) : json(o.model_path)},
                     {"embedded_model", o.model_path.empty()},
                     {"inputs", inputs},
                     {"outputs", outputs},
                     {"device", o.device},
                     {"device_full_name", device_name},
                     {"performance_hint", hint},
                     {"num_streams", streams},
                     {"inference_num_threads", threads},
                     {"nireq", nireq},
                     {"optimal_number_of_infer_requests", optimal},
                     {"max_requests_in_flight", max_in_flight},
                     {"time_limit_s", time_limited ? json(time_limit_s) : json(nullptr)},
                     {"iteration_limit", o.niter > 0 ? json(o.niter) : json(nullptr)},
                     {"perf_count", o.perf_counts},
                     {"compile_time_ms", compile_ms}}},
                   {"first_inference_ms", first_ms},
                   {"results",
                    {{"count", count},
                     {"failed", failed},
                     {"duration_s", duration_s},
                     {"throughput_fps", fps},
                     {"latency_ms",
                      {{"median", lat.median},
                       {"average", lat.average},
                       {"min", lat.min},
                       {"max", lat.max},
                       {"p90", lat.p90},
                       {"p99", lat.p99}}}}},
                   {"pipeline",
                    {{"requests", summary.requests},
                     {"failed", summary.failed},
                     {"wall_ms", summary.wall_us / 1e3},
                     {"mean_requests_in_flight", summary.mean_in_flight},
                     {"stage_overlap", summary.stage_overlap},
                     {"bottleneck", summary.bottleneck},
                     {"stages", stages}}}};
    if (o.perf_counts) {
      json per_op = json::array();
      for (const auto& op : ops) {
        const double runs = static_cast<double>(std::max<size_t>(op.runs, 1));
        per_op.push_back({{"name", op.name},
                          {"type", op.type},
                          {"implementation", op.implementation},
                          {"runs", op.runs},
                          {"mean_real_us", op.real_us / runs},
                          {"mean_cpu_us", op.cpu_us / runs}});
      }
      report["per_op"] = per_op;
    }
    if (first_error) report["error"] = error_text(first_error);
    std::ofstream out(o.report[1]);
    out << report.dump(2) << "\n";
    if (!out) {
      std::cerr << "troupe bench: error: cannot write report file '" << o.report[1] << "'\n";
      return 1;
    }
    fmt::print("\nreport written to {}\n", o.report[1]);
  }

  if (first_error) {
    std::cerr << "troupe bench: error: " << failed
              << " request(s) failed; first error: " << error_text(first_error) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

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
  cmd->add_option("--trace", o.trace_path,
                  "Write a Chrome Trace Event / Perfetto JSON of the run to FILE: a track per stage "
                  "and execute stream, each request's stages, flow arrows, per-op spans with --pc");
  cmd->add_option("--timeline", o.timeline_path,
                  "Write an SVG picture of stage occupancy over time to FILE");
  cmd->add_option("--report", o.report,
                  "Write every printed figure to FILE as JSON (the only report type is 'json')")
      ->option_text("json FILE")
      ->expected(2);
  cmd->parse_complete_callback([&o] {
    if (!o.report.empty() && o.report[0] != "json")
      throw CLI::ValidationError("--report", "report type '" + o.report[0] +
                                                 "' is not supported (use: --report json FILE)");
  });
  return cmd;
}

int run_bench(const BenchOptions& options) {
  try {
    return bench(options);
  } catch (const std::exception& e) {
    std::cerr << "troupe bench: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace troupe::apps
