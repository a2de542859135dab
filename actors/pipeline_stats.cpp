#include "actors/pipeline_stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include <fmt/format.h>

#include "troupe/profiling_info.hpp"

namespace troupe::detail {

namespace {
// Bounded memory for long runs: percentiles are computed over the most recent traces. 2^16 traces
// of ~200 bytes are 13 MB per compiled model (2^18 were 54 MB, most of a small model's resident
// memory), and p99 still rests on 650 of them. A profiled trace also holds one OpTiming per node:
// those windows shrink so that they hold at most 2^20 node timings (24 MB).
constexpr size_t max_traces = size_t{1} << 16;
constexpr size_t max_op_timings = size_t{1} << 20;

size_t trace_window(const RequestTrace& trace) {
  return std::clamp(max_op_timings / (1 + trace.ops.size()), size_t{1024}, max_traces);
}

double percentile(std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(rank));
  size_t hi = std::min(sorted.size() - 1, lo + 1);
  double frac = rank - static_cast<double>(lo);
  return sorted[lo] * (1 - frac) + sorted[hi] * frac;
}
}  // namespace

void PipelineStats::record(const RequestTrace& trace, bool failed) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed) ++failed_;
  accumulate(trace, failed);
  const size_t window = trace_window(trace);
  if (traces_.size() >= window)  // drop the older half at once: one move per window/2 requests
    traces_.erase(traces_.begin(),
                  traces_.begin() + static_cast<std::ptrdiff_t>(traces_.size() - window / 2));
  traces_.push_back(trace);
}

void PipelineStats::accumulate(const RequestTrace& trace, bool failed) {
  ++(failed ? totals_.failure : totals_.success);
  if (trace.completed_ns > trace.submitted_ns)
    totals_.request_ns += static_cast<uint64_t>(trace.completed_ns - trace.submitted_ns);
  for (size_t i = 0; i < stage_count; ++i) {
    const StageSpan& span = trace.stages[i];
    if (span.end_ns == 0) continue;
    const int batch = std::max(1, span.batch);
    const uint64_t duration =
        static_cast<uint64_t>(std::max<int64_t>(0, span.end_ns - span.start_ns));
    StageCounter& counter = totals_.stages[i];
    ++counter.runs;
    counter.busy_ns += duration / static_cast<uint64_t>(batch);
    const int64_t ready = trace.ready_ns(i);
    if (ready > 0 && span.start_ns > ready)
      counter.queue_ns += static_cast<uint64_t>(span.start_ns - ready);
    if (i == static_cast<size_t>(Stage::execute)) {
      BatchCounter& per_batch = batch_requests_[batch];
      ++per_batch.executions;  // requests; divided by the batch size when read
      per_batch.ns += duration;
    }
  }
}

PipelineCounters PipelineStats::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  PipelineCounters c = totals_;
  for (const auto& [batch, requests] : batch_requests_) {
    const auto b = static_cast<uint64_t>(batch);
    c.batches[batch] = BatchCounter{(requests.executions + b - 1) / b, requests.ns / b};
  }
  return c;
}

void PipelineStats::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  traces_.clear();
  failed_ = 0;
}

std::vector<RequestTrace> PipelineStats::traces() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return traces_;
}

PipelineSummary PipelineStats::summary() const {
  std::vector<RequestTrace> traces;
  PipelineSummary s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    traces = traces_;
    s.failed = failed_;
  }
  s.requests = traces.size();
  for (size_t i = 0; i < stage_count; ++i) {
    s.stages[i].name = stage_names[i];
    s.stages[i].workers = i == static_cast<size_t>(Stage::execute) ? execute_streams_ : 1;
  }
  if (traces.empty()) return s;
  int64_t first = traces.front().submitted_ns, last = traces.front().completed_ns;
  double in_flight_ns = 0;
  for (const auto& t : traces) {
    first = std::min(first, t.submitted_ns);
    last = std::max(last, t.completed_ns);
    in_flight_ns += static_cast<double>(t.completed_ns - t.submitted_ns);
  }
  s.wall_us = static_cast<double>(last - first) / 1e3;
  if (s.wall_us <= 0) s.wall_us = 1e-3;
  s.mean_in_flight = in_flight_ns / 1e3 / s.wall_us;
  double total_busy = 0;
  for (size_t i = 0; i < stage_count; ++i) {
    std::vector<double> d;
    double wait = 0, busy = 0, runs = 0;
    size_t waits = 0;
    for (const auto& t : traces) {
      const StageSpan& span = t.stages[i];
      if (span.end_ns == 0) continue;
      d.push_back(static_cast<double>(span.end_ns - span.start_ns) / 1e3);
      // The requests of one batch share its span: each counts its share towards busy time.
      const double share = 1.0 / std::max(1, span.batch);
      busy += d.back() * share;
      runs += share;
      if (i == static_cast<size_t>(Stage::execute))
        s.stages[i].batch_runs[std::max(1, span.batch)] += share;
      const int64_t ready = t.ready_ns(i);
      if (ready > 0) {
        wait += static_cast<double>(span.start_ns - ready) / 1e3;
        ++waits;
      }
    }
    StageSummary& st = s.stages[i];
    st.count = d.size();
    if (d.empty()) continue;
    std::sort(d.begin(), d.end());
    st.busy_us = busy;
    st.mean_batch = static_cast<double>(d.size()) / runs;
    st.mean_us = std::accumulate(d.begin(), d.end(), 0.0) / static_cast<double>(d.size());
    st.p50_us = percentile(d, 50);
    st.p90_us = percentile(d, 90);
    st.p99_us = percentile(d, 99);
    st.max_us = d.back();
    st.queue_wait_mean_us = waits ? wait / static_cast<double>(waits) : 0;
    st.occupancy = st.busy_us / (s.wall_us * st.workers);
    total_busy += st.busy_us;
  }
  s.stage_overlap = total_busy / s.wall_us;
  size_t worst = 0;
  for (size_t i = 1; i < stage_count; ++i)
    if (s.stages[i].occupancy > s.stages[worst].occupancy) worst = i;
  size_t second = worst == 0 ? 1 : 0;
  for (size_t i = 0; i < stage_count; ++i)
    if (i != worst && s.stages[i].occupancy > s.stages[second].occupancy) second = i;
  const StageSummary& w = s.stages[worst];
  std::ostringstream os;
  os << "bottleneck: '" << w.name << "' is busy " << fmt::format("{:.0f}", w.occupancy * 100)
     << "% of wall time";
  if (worst == static_cast<size_t>(Stage::execute))
    os << " with " << execute_streams_ << " stream(s)";
  os << "; next is '" << s.stages[second].name << "' at "
     << fmt::format("{:.0f}", s.stages[second].occupancy * 100) << "%.";
  if (w.occupancy < 0.5)
    os << " No stage is saturated: more requests in flight (-nireq) would raise throughput.";
  else if (worst == static_cast<size_t>(Stage::execute))
    os << " Faster kernels, more streams or batching would move it.";
  else
    os << " Work in this stage is serial: make it cheaper (e.g. feed tensors already in the "
          "model's type and layout).";
  s.bottleneck = os.str();
  return s;
}

std::string format_summary(const PipelineSummary& s) {
  std::string out;
  out += fmt::format("{:<34} {:>8} {:>10} {:>10} {:>10} {:>10} {:>11} {:>9}\n", "stage", "count",
                     "mean us", "p50 us", "p90 us", "p99 us", "queue us", "busy %");
  for (const auto& st : s.stages)
    out += fmt::format("{:<34} {:>8} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.1f} {:>11.1f} {:>9.1f}\n",
                       st.name, st.count, st.mean_us, st.p50_us, st.p90_us, st.p99_us,
                       st.queue_wait_mean_us, st.occupancy * 100);
  out += fmt::format(
      "requests: {} ({} failed), wall {:.1f} ms, mean requests in flight {:.2f}, stage overlap "
      "(sum of stage busy time / wall time) {:.2f}\n",
      s.requests, s.failed, s.wall_us / 1e3, s.mean_in_flight, s.stage_overlap);
  const StageSummary& execute = s.stages[static_cast<size_t>(Stage::execute)];
  if (execute.mean_batch > 1.005) {
    out += fmt::format("automatic batching: {:.2f} requests per execute run on average\n",
                       execute.mean_batch);
    out += "batch sizes (size: runs):";
    for (const auto& [size, runs] : execute.batch_runs)
      out += fmt::format(" {}: {:.0f}", size, runs);
    out += "\n";
  }
  out += s.bottleneck + "\n";
  return out;
}

}  // namespace troupe::detail
