#include "apps/perf_server_stats.hpp"

#include <exception>

#include "apps/perf_http_get.hpp"

namespace troupe::apps {

namespace {

using json = nlohmann::json;

// Counters are JSON numbers in Triton; protobuf's JSON mapping writes 64-bit ones as strings.
uint64_t counter(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) return 0;
  const json& v = object[key];
  if (v.is_number_unsigned() || v.is_number_integer()) return v.get<uint64_t>();
  if (v.is_string()) return std::stoull(v.get<std::string>());
  return 0;
}

StatDuration duration(const json& stats, const char* key) {
  if (!stats.contains(key)) return {};
  return {counter(stats[key], "count"), counter(stats[key], "ns")};
}

double average_us(const StatDuration& before, const StatDuration& after) {
  const uint64_t count = after.count - before.count;
  if (after.count <= before.count || after.ns < before.ns) return 0;
  return static_cast<double>(after.ns - before.ns) / static_cast<double>(count) / 1e3;
}

}  // namespace

std::optional<InferenceStats> stats_from_json(const json& body, const std::string& version) {
  if (!body.is_object() || !body.contains("model_stats") || !body["model_stats"].is_array())
    return std::nullopt;
  for (const json& m : body["model_stats"]) {
    if (!m.is_object() || !m.contains("inference_stats")) continue;
    if (!version.empty() && m.contains("version") && m["version"] != version) continue;
    const json& s = m["inference_stats"];
    InferenceStats stats;
    stats.success = duration(s, "success");
    stats.fail = duration(s, "fail");
    stats.queue = duration(s, "queue");
    stats.compute_input = duration(s, "compute_input");
    stats.compute_infer = duration(s, "compute_infer");
    stats.compute_output = duration(s, "compute_output");
    return stats;
  }
  return std::nullopt;
}

ServerBreakdown breakdown(const InferenceStats& before, const InferenceStats& after) {
  ServerBreakdown b;
  b.requests =
      after.success.count >= before.success.count ? after.success.count - before.success.count : 0;
  b.queue_us = average_us(before.queue, after.queue);
  b.compute_input_us = average_us(before.compute_input, after.compute_input);
  b.compute_infer_us = average_us(before.compute_infer, after.compute_infer);
  b.compute_output_us = average_us(before.compute_output, after.compute_output);
  return b;
}

std::optional<InferenceStats> read_server_stats(const Endpoint& http, const std::string& model,
                                                const std::string& version, double timeout_s,
                                                std::string* problem) {
  auto fail = [&](const std::string& why) -> std::optional<InferenceStats> {
    if (problem) *problem = why;
    return std::nullopt;
  };
  std::string target = "/v2/models/" + model;
  if (!version.empty()) target += "/versions/" + version;
  target += "/stats";
  try {
    const HttpReply reply = http_get(http, target, timeout_s);
    if (reply.status != 200)
      return fail("GET " + target + ": HTTP " + std::to_string(reply.status) + " " +
                  abbreviate(reply.body));
    auto stats = stats_from_json(json::parse(reply.body), version);
    if (!stats) return fail("GET " + target + ": no inference_stats in " + abbreviate(reply.body));
    return stats;
  } catch (const std::exception& e) {
    return fail("GET " + target + ": " + e.what());
  }
}

}  // namespace troupe::apps
