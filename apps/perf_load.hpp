#pragma once

// The concurrency loop of `troupe perf`: at each level, C request slots send back to back for a
// warm-up and then a measured phase, each phase bounded in time and in count.

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "apps/perf_server_stats.hpp"

namespace troupe::apps {

using PerfClock = std::chrono::steady_clock;

/// What one phase saw.
struct PhaseResult {
  uint64_t ok = 0;
  uint64_t errors = 0;
  std::string first_error;
  std::vector<double> latencies_us;  // of the successful requests, sorted
  double seconds = 0;                // first request sent to last one answered
};

/// The latency at percentile `p` (0-100) of sorted latencies, by nearest rank; 0 when empty.
double percentile(const std::vector<double>& sorted_us, double p);

/// One phase's bounds and records, shared by the slots of a transport (thread-safe).
class LoadSchedule {
 public:
  /// Requests may start for `seconds` from now and up to `max_requests` of them.
  LoadSchedule(double seconds, long long max_requests);
  /// Whether a slot may send one more request now; counts it when it may.
  bool try_start();
  /// Records an answered (or failed) request; `error` describes a failure.
  void finish(PerfClock::time_point sent, bool ok, const std::string& error = {});
  /// The records so far, latencies sorted.
  PhaseResult result() const;

 private:
  const PerfClock::time_point end_;
  const long long max_requests_;
  mutable std::mutex mutex_;
  long long started_ = 0;
  std::optional<PerfClock::time_point> first_sent_;
  PerfClock::time_point last_answered_;
  PhaseResult result_;
};

/// A protocol's way of keeping requests in flight (HTTP connections, gRPC calls on one channel).
class InferTransport {
 public:
  virtual ~InferTransport() = default;
  /// Prepares `slots` independent request slots, replacing the previous ones (HTTP: a keep-alive
  /// connection each). Throws PerfError when the server cannot be reached.
  virtual void open(int slots) = 0;
  /// Each slot sends a request, waits for its answer and sends the next while
  /// `schedule.try_start()` allows; returns once every slot's last request is answered or failed.
  /// A request that gets no answer within the transport's timeout counts as failed.
  virtual void run(LoadSchedule& schedule) = 0;
};

/// The load at one concurrency level and what the server said it spent.
struct LevelResult {
  int concurrency = 0;
  PhaseResult measured;
  std::optional<ServerBreakdown> server;
};

/// Reads the server's cumulative statistics; nullopt when they cannot be had.
using StatsReader = std::function<std::optional<InferenceStats>()>;

/// Runs one level: opens `concurrency` slots, warms up for `warmup_seconds`, then measures for
/// `seconds`; each phase sends at most `max_requests`. With a `stats` reader, the server's
/// breakdown is the difference of its statistics around the measured phase.
LevelResult run_level(InferTransport& transport, int concurrency, double warmup_seconds,
                      double seconds, long long max_requests, const StatsReader& stats);

}  // namespace troupe::apps
