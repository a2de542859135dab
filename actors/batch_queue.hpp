#pragma once

// The scheduler's decisions, apart from the actor that acts on them: which waiting requests run
// next and together, which are refused, which have timed out. Time is a parameter (steady-clock
// ns), so the policy is tested with a fake clock.

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "engine/graph/scheduling_policy.hpp"

namespace troupe::actors {

/// A request waiting in the scheduler.
struct QueuedRequest {
  uint64_t id = 0;
  int level = 0;  // 0 = highest priority; the level asked for, whichever level it waits in
  int64_t arrival_ns = 0;
  int64_t deadline_ns = 0;  // 0 = no timeout
  uint64_t shape_key = 0;   // requests merge only with equal keys (their input shapes and types)
};

/// Priority queues with Triton's dynamic-batching rules. Order: level 1 first; within a level,
/// arrival order, then the requests whose DELAY timeout passed. With priority_aging_us, a
/// request that has waited k times that long moves k levels up (at the next decision), among
/// that level's requests by arrival; its queue policy stays its own level's. A batch is the first
/// request in that order plus the following ones with its shape key, up to max_batch_size. It
/// leaves at once when it is full or reaches a preferred size (the largest it can), otherwise once
/// its first request has waited max_queue_delay.
class BatchQueue {
 public:
  explicit BatchQueue(detail::SchedulingPolicy policy);

  /// Takes effect for the next decisions; queued requests keep their place (levels beyond the new
  /// count move to the lowest level).
  void set_policy(const detail::SchedulingPolicy& policy);
  const detail::SchedulingPolicy& policy() const { return policy_; }
  /// The queue policy of a 0-based level (clamped to the levels there are), resolved once per
  /// policy rather than per request.
  const detail::QueuePolicy& queue_policy(int level) const {
    return queues_[static_cast<size_t>(std::clamp(level, 0, policy_.levels() - 1))];
  }

  /// False (and nothing queued) when the request's level already holds max_queue_size requests.
  bool push(const QueuedRequest& request);

  /// Handles the timeouts that passed at `now`: returns the ids of REJECT requests (removed);
  /// DELAY requests move behind the others of their level.
  std::vector<uint64_t> expire(int64_t now);

  /// The ids of the batch that should run now, removed from the queue; empty when none should.
  /// `limit` (> 0) caps the batch below max_batch_size; a batch that reaches it is full.
  std::vector<uint64_t> next_batch(int64_t now, int limit = 0);
  /// For the top priority level's own stream: the requests that asked for level 1, the first of
  /// them in scheduling order and those after it with its shape key, up to a batch (`limit` > 0
  /// caps it), removed; at once, whatever the batch delay. Empty when none waits.
  std::vector<uint64_t> next_top_level_batch(int limit = 0);

  /// The earliest time something may change without a new request: a timeout, or (when
  /// `with_delay`) the moment the first request's batch delay ends. 0 = none.
  int64_t next_event(bool with_delay) const;

  size_t size() const { return size_; }
  size_t size(int level) const;
  /// Removes the request with this id, wherever it waits; false when it is not queued.
  bool remove(uint64_t id);
  /// Removes and returns every queued id (shutdown).
  std::vector<uint64_t> take_all();

 private:
  struct Level {
    std::deque<QueuedRequest> normal, delayed;
  };
  const QueuedRequest* head() const;
  size_t batch_limit(int limit) const;  // max_batch_size, capped by `limit` > 0
  /// Removes and returns, in scheduling order, up to `count` requests `takes(request, first)`
  /// accepts (`first`: none taken yet).
  template <class Takes>
  std::vector<uint64_t> take_in_order(size_t count, Takes takes);
  void promote(int64_t now);

  detail::SchedulingPolicy policy_;
  std::vector<detail::QueuePolicy> queues_;  // per level: policy_.queue_of(level)
  std::vector<Level> levels_;
  size_t size_ = 0;
};

}  // namespace troupe::actors
