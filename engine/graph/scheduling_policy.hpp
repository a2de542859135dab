#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "troupe/any.hpp"

namespace troupe::detail {

/// What happens to a request whose queue timeout passes before it is scheduled.
enum class TimeoutAction { reject, delay };

/// Queue policy of the scheduler (Triton's ModelQueuePolicy): `default_queue_policy` for every
/// priority level, or one level's own (`priority_queue_policy`).
struct QueuePolicy {
  int64_t max_queue_size = 0;      // requests waiting per level; 0 = unbounded
  int64_t default_timeout_us = 0;  // 0 = no timeout
  TimeoutAction timeout_action = TimeoutAction::reject;
  bool allow_timeout_override = false;  // a request may set a shorter timeout of its own
};

/// How the pipeline's scheduler (the actor in front of the stages) orders, batches and refuses
/// requests: Triton's `dynamic_batching` settings, under their Triton names as properties. The
/// defaults schedule like a plain FIFO: no batching, no priorities, no timeouts, no bound.
struct SchedulingPolicy {
  int max_batch_size = 1;  // requests merged into one run; 1 = no batching
  // troupe's own: batch only up to the size that has measured fastest (actors/batch_size_tuner),
  // at most max_batch_size. false: every batch as large as the queue allows, as Triton's.
  bool adaptive_batch_size = true;
  std::vector<int64_t> preferred_batch_sizes;
  int64_t max_queue_delay_us = 0;  // how long the oldest request may wait for a batch
  bool preserve_ordering = false;  // responses leave in arrival order
  int priority_levels = 0;         // 0 = no priorities (one level)
  int default_priority_level = 0;  // 0 = the lowest level
  // troupe's own, against starvation: a request that has waited k times this long competes as k
  // levels higher, in arrival order. 0 = strict priorities, as Triton's.
  int64_t priority_aging_us = 0;
  // troupe's own: one more stream, which only batches of requests asking for the highest of two or
  // more levels take, when every other stream is busy: such a request does not wait for a running
  // batch of lower ones, it runs beside them (sharing the cores). Costs one stream's buffers; fixed
  // at compilation.
  bool top_priority_stream = false;
  QueuePolicy queue;
  // Triton's priority_queue_policy: a level's own queue policy fields (by 1-based priority
  // level, validated), over `queue` for the requests of that level.
  std::map<int, AnyMap> priority_queue_policy;

  /// The queue policy of a 0-based level: `queue` with the level's own fields.
  QueuePolicy queue_of(int level) const;
  int levels() const { return priority_levels > 0 ? priority_levels : 1; }
  /// The level (0-based, 0 = highest) of a request asking for `priority` (1-based, 0 = the
  /// default). Throws InvalidArgument naming the priority when it is out of range.
  int level_of(int64_t priority) const;
  /// The timeout (µs, 0 = none) of a request of 0-based `level` asking for `timeout_us` (0 = the
  /// level's default).
  int64_t timeout_of(int level, int64_t timeout_us) const;
  /// The same under the level's queue policy `q`.
  static int64_t timeout_under(const QueuePolicy& q, int64_t timeout_us);
  /// Whether a request asking for `priority` waits at the highest of two or more levels (false
  /// for a priority out of range: it is refused).
  bool is_top_level(int64_t priority) const;
  /// Whether the scheduler has anything to do beyond FIFO admission.
  bool is_default() const;
};

/// The scheduling properties' names, as CompiledModel and config.json take them.
const std::vector<std::string>& scheduling_property_names();
bool is_scheduling_property(const std::string& key);

/// Sets one scheduling property, validating its value (InvalidArgument naming the key and the
/// allowed values). `max_batch_size` is AUTO_BATCH_MAX_SIZE under Triton's name.
void apply_scheduling_property(SchedulingPolicy& policy, const std::string& key, const Any& value);
/// Checks the policy as a whole (e.g. the default level within the levels).
void validate(const SchedulingPolicy& policy);
/// The policy as properties (what get_property reports).
AnyMap scheduling_properties(const SchedulingPolicy& policy);

}  // namespace troupe::detail
