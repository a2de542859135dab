#include "apps/bench_report_json.hpp"

#include <fmt/format.h>

#include "apps/bench_output_file.hpp"
#include "apps/bench_runner.hpp"

namespace troupe::apps {

namespace {

using json = nlohmann::json;

json config_json(const BenchOptions& o, const BenchModel& model, const Workload& workload) {
  json inputs = json::array(), outputs = json::array();
  for (const auto& in : model.compiled.inputs()) inputs.push_back(value_json(in));
  for (const auto& out : model.compiled.outputs()) outputs.push_back(value_json(out));
  return {{"model", model.name},
          {"model_path", o.model_path.empty() ? json(nullptr) : json(o.model_path)},
          {"embedded_model", o.model_path.empty()},
          {"inputs", inputs},
          {"outputs", outputs},
          {"device", o.device},
          {"device_full_name", model.device_full_name},
          {"performance_hint", model.performance_hint},
          {"num_streams", model.streams},
          {"inference_num_threads", model.threads},
          {"nireq", workload.requests.size()},
          {"optimal_number_of_infer_requests", model.optimal_requests},
          {"max_requests_in_flight", model.max_requests_in_flight},
          {"time_limit_s", has_time_limit(o) ? json(time_limit_s(o)) : json(nullptr)},
          {"iteration_limit", o.niter > 0 ? json(o.niter) : json(nullptr)},
          {"perf_count", o.perf_counts},
          {"pc_sort", o.pc_sort},
          {"batch", workload.batch},
          {"inference_precision", model.inference_precision},
          {"auto_batch_max_size", model.auto_batch_max_size},
          {"execute_on_scheduler", model.execute_on_scheduler},
          {"large_request_threads", model.large_request_threads},
          {"cache_dir", model.cache_dir.empty() ? json(nullptr) : json(model.cache_dir)},
          {"loaded_from_cache", model.loaded_from_cache},
          {"compile_time_ms", model.compile_ms}};
}

json results_json(const RunResults& r) {
  return {{"count", r.count},
          {"failed", r.failed},
          {"duration_s", r.duration_s},
          {"throughput_fps", r.throughput_fps},
          {"peak_rss_bytes", r.peak_rss_bytes},
          {"rss_bytes", r.rss_bytes},
          {"latency_ms",
           {{"median", r.latency.median},
            {"average", r.latency.average},
            {"min", r.latency.min},
            {"max", r.latency.max},
            {"p90", r.latency.p90},
            {"p99", r.latency.p99}}}};
}

json pipeline_json(const RunResults& r) {
  const detail::PipelineSummary& summary = r.pipeline;
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
  return {{"requests", summary.requests},
          {"failed", summary.failed},
          {"wall_ms", summary.wall_us / 1e3},
          {"mean_requests_in_flight", summary.mean_in_flight},
          {"stage_overlap", summary.stage_overlap},
          {"merged_run_fallbacks", r.merged_run_fallbacks},
          {"execute_mean_batch",
           summary.stages[static_cast<size_t>(detail::Stage::execute)].mean_batch},
          {"bottleneck", summary.bottleneck},
          {"stages", stages}};
}

json per_op_json(const std::vector<OpCounter>& ops) {
  json per_op = json::array();
  for (const auto& op : ops)
    per_op.push_back({{"name", op.name},
                      {"type", op.type},
                      {"precision", op.precision},
                      {"implementation", op.implementation},
                      {"runs", op.runs},
                      {"mean_real_us", op.mean_real_us()},
                      {"mean_cpu_us", op.mean_cpu_us()}});
  return per_op;
}

}  // namespace

json value_json(const ValueInfo& v) {
  return {{"name", v.name}, {"type", std::string(to_string(v.type))}, {"shape", v.shape.dims()}};
}

void write_json_report(const std::string& path, const BenchOptions& o, const BenchModel& model,
                       const Workload& workload, const RunResults& results,
                       const std::vector<OpCounter>& ops) {
  json report = {{"config", config_json(o, model, workload)},
                 {"first_inference_ms", results.first_inference_ms},
                 {"results", results_json(results)},
                 {"pipeline", pipeline_json(results)}};
  if (o.perf_counts) report["per_op"] = per_op_json(ops);
  if (results.first_error) report["error"] = error_text(results.first_error);
  write_output_file(path, "report", report.dump(2) + "\n");
  fmt::print("\nreport written to {}\n", path);
}

}  // namespace troupe::apps
