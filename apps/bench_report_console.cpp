#include "apps/bench_report_console.hpp"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "troupe/properties.hpp"

namespace troupe::apps {

namespace {

void print_row(const std::string& key, const std::string& value) {
  fmt::print("{:<26}{}\n", key, value);
}

std::string describe(const ValueInfo& v) {
  return fmt::format("{} {} {}", v.name, to_string(v.type), v.shape.to_string());
}

std::string describe_limit(const BenchOptions& o) {
  const bool time_limited = has_time_limit(o);
  std::string limit;
  if (time_limited) limit = fmt::format("{:g} s", time_limit_s(o));
  if (o.niter > 0) limit += (limit.empty() ? "" : " or ") + fmt::format("{} iterations", o.niter);
  return limit + (time_limited && o.niter > 0 ? ", whichever comes first" : "");
}

std::string describe_auto_batch(const BenchOptions& o, const BenchModel& model) {
  if (model.auto_batch_max_size > 1)
    return fmt::format("up to {} waiting requests per run", model.auto_batch_max_size);
  if (o.auto_batch > 1)
    return fmt::format("off (asked for {}; the model has no dynamic batch dimension)",
                       o.auto_batch);
  return "off";
}

}  // namespace

void print_config(const BenchOptions& o, const BenchModel& model, const Workload& workload) {
  const CompiledModel& compiled = model.compiled;
  fmt::print("[ config ]\n");
  print_row("model", o.model_path.empty() ? model.name + " (embedded default model)"
                                          : model.name + " (" + o.model_path + ")");
  for (const auto& in : compiled.inputs()) print_row("  input", describe(in));
  for (const auto& out : compiled.outputs()) print_row("  output", describe(out));
  const std::vector<Shape>& shapes = workload.input_shapes;
  for (size_t k = 0; k < shapes.size(); ++k)
    if (shapes[k] != compiled.inputs()[k].shape)
      print_row("  run as", compiled.inputs()[k].name + " " + shapes[k].to_string());
  if (workload.had_dynamic)
    print_row("  note", "dynamic input dimensions not given by -b/-shape were set to 1");
  print_row("batch", std::to_string(workload.batch));
  print_row("device", model.device_full_name.empty()
                          ? o.device
                          : o.device + " (" + model.device_full_name + ")");
  print_row("performance hint", model.performance_hint);
  print_row("streams", std::to_string(model.streams));
  print_row("threads", fmt::format("{} ({} per stream)", model.threads,
                                   std::max(1, model.threads / model.streams)));
  std::string execute_venue = model.execute_on_scheduler
                                  ? "the scheduler's workers, with the other stages (small model)"
                                  : "a thread per stream";
  if (model.large_request_threads > 1)
    execute_venue += fmt::format("; large requests on a thread of their own, {} threads",
                                 model.large_request_threads);
  print_row("execute runs on", execute_venue);
  print_row("callbacks run on", model.callbacks_on_stage
                                    ? "the stage that finished the request (CALLBACK_THREAD)"
                                    : "the completion thread (CALLBACK_THREAD)");
  print_row("infer requests (nireq)",
            fmt::format("{}{}", workload.requests.size(),
                        o.nireq > 0 ? "" : " (OPTIMAL_NUMBER_OF_INFER_REQUESTS)"));
  print_row("max requests in flight",
            std::to_string(model.max_requests_in_flight) + " (pipeline credits)");
  print_row("automatic batching", describe_auto_batch(o, model));
  print_row("limit", describe_limit(o));
  print_row("per-op counters", o.perf_counts ? "on (PERF_COUNT), order: " + o.pc_sort : "off");
  print_row("inference precision", model.inference_precision);
  if (!model.cache_dir.empty()) print_row("cache dir", model.cache_dir);
  print_row("loaded from cache", model.loaded_from_cache ? "yes" : "no");
  print_row("compile time", fmt::format("{:.2f} ms", model.compile_ms));
}

void print_first_inference(double ms) {
  fmt::print("\n[ first inference ]\n");
  print_row("first inference", fmt::format("{:.3f} ms", ms));
  std::fflush(stdout);
}

void print_results(const RunResults& r, const BenchModel& model) {
  fmt::print("\n[ results ]\n");
  print_row("count",
            fmt::format("{} requests in {:.3f} s ({} failed)", r.count, r.duration_s, r.failed));
  print_row("throughput", fmt::format("{:.2f} FPS", r.throughput_fps));
  print_row("latency median", fmt::format("{:.3f} ms", r.latency.median));
  print_row("latency average", fmt::format("{:.3f} ms", r.latency.average));
  print_row("latency min", fmt::format("{:.3f} ms", r.latency.min));
  print_row("latency max", fmt::format("{:.3f} ms", r.latency.max));
  print_row("latency p90", fmt::format("{:.3f} ms", r.latency.p90));
  print_row("latency p99", fmt::format("{:.3f} ms", r.latency.p99));
  print_row("peak memory (RSS)", fmt::format("{:.1f} MB", r.peak_rss_bytes / 1e6));
  print_row("memory at the end (RSS)", fmt::format("{:.1f} MB", r.rss_bytes / 1e6));

  fmt::print(
      "\n[ pipeline stages ] (per request; busy % = stage busy time / (wall time x workers))\n");
  fmt::print("{}", detail::format_summary(r.pipeline));
  if (model.auto_batch_max_size > 1)
    fmt::print("automatic batching: {} merged runs failed and ran their requests alone\n",
               r.merged_run_fallbacks);
  print_row("mean requests in flight", fmt::format("{:.2f}", r.pipeline.mean_in_flight));
  print_row("stage overlap",
            fmt::format("{:.2f} (sum of stage busy time / wall time)", r.pipeline.stage_overlap));
  if (model.remote) {
    // The router's side of the run: where requests went and what the replicas' losses cost.
    const CompiledModel& c = model.compiled;
    auto count = [&](const char* name) { return c.get_property(name).as_int(); };
    print_row(
        "replicas",
        fmt::format("{}", fmt::join(c.get_property(props::execution_devices).as_strings(), ", ")));
    print_row("remote requests",
              fmt::format("{} sent, {} retried on another replica, {} failed unanswered",
                          count(props::remote_sent_requests), count(props::remote_retried_requests),
                          count(props::remote_unavailable_requests)));
    print_row("replicas lost",
              fmt::format("{} ({} found again)", count(props::remote_replicas_lost),
                          count(props::remote_reconnects)));
  }
}

void print_op_counters(const std::vector<OpCounter>& ops, const std::string& pc_sort) {
  double total_real = 0;
  for (const auto& op : ops) total_real += op.mean_real_us();
  fmt::print("\n[ per-op counters ] (averaged over runs; {})\n", pc_sort);
  fmt::print("{:<24} {:<20} {:<5} {:<28} {:>8} {:>11} {:>11} {:>7}\n", "node", "type", "prec",
             "implementation", "runs", "real us", "cpu us", "%");
  for (const auto& op : ops) {
    const double real = op.mean_real_us();
    fmt::print("{:<24} {:<20} {:<5} {:<28} {:>8} {:>11.2f} {:>11.2f} {:>7.1f}\n", op.name, op.type,
               op.precision, op.implementation, op.runs, real, op.mean_cpu_us(),
               total_real > 0 ? 100.0 * real / total_real : 0.0);
  }
  // Reference kernels are the specification, not meant for hot paths: say how much time they take
  // (troupe's "ref", and oneDNN's own "dnnl:ref:..." which it picks where its JIT kernels decline).
  double reference_real = 0;
  size_t reference_nodes = 0;
  const OpCounter* slowest = nullptr;
  for (const auto& op : ops) {
    const bool reference =
        op.implementation == "ref" || op.implementation.rfind("dnnl:ref", 0) == 0;
    if (!reference || op.runs == 0) continue;
    ++reference_nodes;
    reference_real += op.mean_real_us();
    if (!slowest || op.mean_real_us() > slowest->mean_real_us()) slowest = &op;
  }
  fmt::print("reference kernels: {} nodes, {:.1f}% of op time{}\n", reference_nodes,
             total_real > 0 ? 100.0 * reference_real / total_real : 0.0,
             slowest ? fmt::format(" (slowest: {} {} {:.2f} us)", slowest->type, slowest->name,
                                   slowest->mean_real_us())
                     : std::string());
}

}  // namespace troupe::apps
