#include "actors/batch_queue.hpp"

#include <algorithm>
#include <iterator>

namespace troupe::actors {

BatchQueue::BatchQueue(detail::SchedulingPolicy policy) {
  set_policy(policy);
}

void BatchQueue::set_policy(const detail::SchedulingPolicy& policy) {
  policy_ = policy;
  const size_t n = static_cast<size_t>(policy_.levels());
  queues_.clear();
  for (size_t l = 0; l < n; ++l) queues_.push_back(policy_.queue_of(static_cast<int>(l)));
  if (levels_.size() > n) {
    // Requests of levels that no longer exist keep their order, behind the lowest level's.
    Level& lowest = levels_[n - 1];
    for (size_t l = n; l < levels_.size(); ++l) {
      for (QueuedRequest& r : levels_[l].normal) lowest.normal.push_back(r);
      for (QueuedRequest& r : levels_[l].delayed) lowest.delayed.push_back(r);
    }
  }
  levels_.resize(n);
  // The level each request asked for, within the new count.
  for (Level& level : levels_)
    for (auto* queue : {&level.normal, &level.delayed})
      for (QueuedRequest& r : *queue) r.level = std::min(r.level, static_cast<int>(n - 1));
}

size_t BatchQueue::size(int level) const {
  const Level& l = levels_.at(static_cast<size_t>(level));
  return l.normal.size() + l.delayed.size();
}

bool BatchQueue::push(const QueuedRequest& request) {
  const int level = std::clamp(request.level, 0, policy_.levels() - 1);
  const int64_t limit = queue_policy(level).max_queue_size;
  if (limit > 0 && static_cast<int64_t>(size(level)) >= limit) return false;
  QueuedRequest r = request;
  r.level = level;
  levels_[static_cast<size_t>(level)].normal.push_back(r);
  ++size_;
  return true;
}

std::vector<uint64_t> BatchQueue::expire(int64_t now) {
  std::vector<uint64_t> rejected;
  for (Level& level : levels_) {
    for (auto it = level.normal.begin(); it != level.normal.end();) {
      if (it->deadline_ns == 0 || it->deadline_ns > now) {
        ++it;
        continue;
      }
      // A promoted request keeps the timeout action of the level it asked for.
      if (queue_policy(it->level).timeout_action == detail::TimeoutAction::reject) {
        rejected.push_back(it->id);
        --size_;
      } else {
        QueuedRequest late = *it;
        late.deadline_ns = 0;
        level.delayed.push_back(late);
      }
      it = level.normal.erase(it);
    }
  }
  return rejected;
}

const QueuedRequest* BatchQueue::head() const {
  for (const Level& level : levels_) {
    if (!level.normal.empty()) return &level.normal.front();
    if (!level.delayed.empty()) return &level.delayed.front();
  }
  return nullptr;
}

void BatchQueue::promote(int64_t now) {
  const int64_t step = policy_.priority_aging_us * 1000;
  if (step <= 0) return;
  for (size_t l = 1; l < levels_.size(); ++l) {
    std::deque<QueuedRequest>& queue = levels_[l].normal;
    // Arrival order: the front has waited longest, so it is the first to move.
    while (!queue.empty()) {
      const QueuedRequest& r = queue.front();
      const int64_t steps = std::max<int64_t>(0, now - r.arrival_ns) / step;
      const auto target = static_cast<size_t>(std::max<int64_t>(0, r.level - steps));
      if (target >= l) break;
      std::deque<QueuedRequest>& up = levels_[target].normal;
      auto at = up.end();
      while (at != up.begin() && std::prev(at)->arrival_ns > r.arrival_ns) --at;
      up.insert(at, r);
      queue.pop_front();
    }
  }
}

size_t BatchQueue::batch_limit(int limit) const {
  const int max_size = limit > 0 ? std::min(limit, policy_.max_batch_size) : policy_.max_batch_size;
  return static_cast<size_t>(std::max(1, max_size));
}

template <class Takes>
std::vector<uint64_t> BatchQueue::take_in_order(size_t count, Takes takes) {
  std::vector<uint64_t> batch;
  for (Level& level : levels_) {
    for (auto* queue : {&level.normal, &level.delayed})
      for (auto it = queue->begin(); it != queue->end() && batch.size() < count;) {
        if (takes(*it, batch.empty())) {
          batch.push_back(it->id);
          it = queue->erase(it);
          --size_;
        } else {
          ++it;
        }
      }
  }
  return batch;
}

std::vector<uint64_t> BatchQueue::next_top_level_batch(int limit) {
  uint64_t key = 0;
  return take_in_order(batch_limit(limit), [&key](const QueuedRequest& r, bool first) {
    if (r.level != 0 || (!first && r.shape_key != key)) return false;
    key = r.shape_key;
    return true;
  });
}

std::vector<uint64_t> BatchQueue::next_batch(int64_t now, int limit) {
  promote(now);
  const QueuedRequest* first = head();
  if (!first) return {};
  const size_t max = batch_limit(limit);
  const uint64_t key = first->shape_key;
  const int64_t first_arrival = first->arrival_ns;

  // The candidates in scheduling order, up to a full batch.
  size_t available = 0;
  for (const Level& level : levels_) {
    for (const auto* queue : {&level.normal, &level.delayed})
      for (const QueuedRequest& r : *queue)
        if (r.shape_key == key && available < max) ++available;
  }
  size_t take = 0;
  if (max == 1 || available >= max) {
    take = std::min(available, max);
  } else {
    for (auto it = policy_.preferred_batch_sizes.rbegin();
         it != policy_.preferred_batch_sizes.rend() && take == 0; ++it)
      if (static_cast<size_t>(*it) <= available) take = static_cast<size_t>(*it);
    if (take == 0 && now - first_arrival >= policy_.max_queue_delay_us * 1000) take = available;
  }
  return take_in_order(take, [key](const QueuedRequest& r, bool) { return r.shape_key == key; });
}

int64_t BatchQueue::next_event(bool with_delay) const {
  int64_t next = 0;
  auto consider = [&next](int64_t t) {
    if (t > 0 && (next == 0 || t < next)) next = t;
  };
  for (const Level& level : levels_)
    for (const QueuedRequest& r : level.normal) consider(r.deadline_ns);
  if (with_delay)
    if (const QueuedRequest* first = head())
      consider(first->arrival_ns + policy_.max_queue_delay_us * 1000);
  return next;
}

bool BatchQueue::remove(uint64_t id) {
  for (Level& level : levels_)
    for (auto* queue : {&level.normal, &level.delayed})
      for (auto it = queue->begin(); it != queue->end(); ++it)
        if (it->id == id) {
          queue->erase(it);
          --size_;
          return true;
        }
  return false;
}

std::vector<uint64_t> BatchQueue::take_all() {
  std::vector<uint64_t> ids;
  for (Level& level : levels_) {
    for (auto* queue : {&level.normal, &level.delayed})
      for (const QueuedRequest& r : *queue) ids.push_back(r.id);
    level.normal.clear();
    level.delayed.clear();
  }
  size_ = 0;
  return ids;
}

}  // namespace troupe::actors
