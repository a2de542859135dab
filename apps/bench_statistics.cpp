#include "apps/bench_statistics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "apps/process_memory.hpp"
#include "engine/runtime/compiled_model_impl.hpp"

namespace troupe::apps {

namespace {

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(sorted.size() - 1, lo + 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] * (1 - frac) + sorted[hi] * frac;
}

LatencySummary summarize_latency(std::vector<double> ms) {
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

}  // namespace

RunResults summarize_run(double first_inference_ms, const Measurement& m, int64_t batch,
                         const CompiledModel& compiled) {
  RunResults r;
  r.first_inference_ms = first_inference_ms;
  r.count = m.latencies_ms.size();
  r.failed = m.failed;
  r.first_error = m.first_error;
  r.duration_s = m.duration_s;
  r.throughput_fps = m.duration_s > 0
                         ? static_cast<double>(r.count) * static_cast<double>(batch) / m.duration_s
                         : 0;
  r.latency = summarize_latency(m.latencies_ms);
  r.pipeline = compiled.impl()->context().stats.summary();
  r.merged_run_fallbacks = compiled.impl()->context().batch_fallbacks.load();
  r.rss_bytes = resident_bytes();
  r.peak_rss_bytes = peak_resident_bytes();
  // The two count pages differently (the kernel's maxrss lags by its per-thread counters).
  r.peak_rss_bytes = std::max(r.peak_rss_bytes, r.rss_bytes);
  return r;
}

}  // namespace troupe::apps
