#include "server/http/statistics_json.hpp"

namespace troupe::server {

using json = nlohmann::json;

namespace {
json duration(uint64_t count, uint64_t ns) {
  return json{{"count", count}, {"ns", ns}};
}
}  // namespace

json model_statistics(ServedModel& model) {
  const PipelineCounters p = model.compiled().counters();
  RequestCounters& c = model.counters();
  const auto& s = p.stages;
  uint64_t queue_ns = 0;
  for (const auto& stage : s) queue_ns += stage.queue_ns;
  const uint64_t pipeline_requests = s[0].runs;
  uint64_t executions = 0;
  json batches = json::array();
  for (const auto& [size, counter] : p.batches) {
    executions += counter.executions;
    batches.push_back(
        {{"batch_size", size}, {"compute_infer", duration(counter.executions, counter.ns)}});
  }
  return json{
      {"name", model.name()},
      {"version", model.version()},
      {"last_inference", c.last_inference_ms.load()},
      {"inference_count", c.inference_count.load()},
      {"execution_count", executions},
      {"inference_stats",
       {{"success", duration(c.success.load(), c.success_ns.load())},
        {"fail", duration(c.failure.load(), c.failure_ns.load())},
        {"queue", duration(pipeline_requests, queue_ns)},
        {"compute_input", duration(pipeline_requests, s[0].busy_ns + s[1].busy_ns)},
        {"compute_infer", duration(s[2].runs, s[2].busy_ns)},
        {"compute_output", duration(s[3].runs, s[3].busy_ns + s[4].busy_ns)}}},
      {"batch_stats", std::move(batches)},
  };
}

json statistics_document(const std::vector<std::shared_ptr<ServedModel>>& models) {
  json list = json::array();
  for (const auto& m : models) list.push_back(model_statistics(*m));
  return json{{"model_stats", std::move(list)}};
}

}  // namespace troupe::server
