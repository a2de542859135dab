#include "apps/perf_load.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::apps {

double percentile(const std::vector<double>& sorted_us, double p) {
  if (sorted_us.empty()) return 0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted_us.size()));
  const size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return sorted_us[std::min(index, sorted_us.size() - 1)];
}

LoadSchedule::LoadSchedule(double seconds, long long max_requests)
    : end_(PerfClock::now() +
           std::chrono::duration_cast<PerfClock::duration>(std::chrono::duration<double>(seconds))),
      max_requests_(max_requests) {}

bool LoadSchedule::try_start() {
  const auto now = PerfClock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (started_ >= max_requests_ || now >= end_) return false;
  ++started_;
  if (!first_sent_) first_sent_ = now;
  return true;
}

void LoadSchedule::finish(PerfClock::time_point sent, bool ok, const std::string& error) {
  const auto now = PerfClock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  last_answered_ = std::max(last_answered_, now);
  if (ok) {
    ++result_.ok;
    result_.latencies_us.push_back(std::chrono::duration<double, std::micro>(now - sent).count());
  } else {
    ++result_.errors;
    if (result_.first_error.empty()) result_.first_error = error.empty() ? "failed" : error;
  }
}

PhaseResult LoadSchedule::result() const {
  std::lock_guard<std::mutex> lock(mutex_);
  PhaseResult r = result_;
  std::sort(r.latencies_us.begin(), r.latencies_us.end());
  if (first_sent_ && last_answered_ > *first_sent_)
    r.seconds = std::chrono::duration<double>(last_answered_ - *first_sent_).count();
  return r;
}

LevelResult run_level(InferTransport& transport, int concurrency, double warmup_seconds,
                      double seconds, long long max_requests, const StatsReader& stats) {
  transport.open(concurrency);
  if (warmup_seconds > 0) {
    // Fills the connections, the server's buffers and the model's streams before timing.
    LoadSchedule warmup(warmup_seconds, max_requests);
    transport.run(warmup);
  }
  const std::optional<InferenceStats> before = stats ? stats() : std::nullopt;
  LoadSchedule schedule(seconds, max_requests);
  transport.run(schedule);
  const std::optional<InferenceStats> after = stats && before ? stats() : std::nullopt;

  LevelResult level;
  level.concurrency = concurrency;
  level.measured = schedule.result();
  if (before && after) level.server = breakdown(*before, *after);
  return level;
}

}  // namespace troupe::apps
