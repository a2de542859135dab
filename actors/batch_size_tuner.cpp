#include "actors/batch_size_tuner.hpp"

#include <algorithm>

namespace troupe::actors {

BatchSizeTuner::BatchSizeTuner(int max_batch_size) {
  const int max = std::max(1, max_batch_size);
  for (int size = 1; size < max; size *= 2) buckets_.push_back(Bucket{size});
  buckets_.push_back(Bucket{max});
}

std::size_t BatchSizeTuner::bucket_of(int size) const {
  std::size_t b = 0;
  while (b + 1 < buckets_.size() && buckets_[b + 1].size <= size) ++b;
  return b;
}

int64_t BatchSizeTuner::cost(const Bucket& b) const {
  if (b.count < min_samples) return 0;
  const int n = std::min(b.count, kept_samples);
  std::array<int64_t, kept_samples> sorted = b.per_request;
  // The lower quartile, not the median: interference (another process, a page fault storm, the
  // other stream's callbacks) only ever adds time, and comes in episodes. An episode covering half
  // the current size's recent measures moved its median, and a neighbour measured before it then
  // looked cheaper: the MLP fell from batches of 32 to 16 and lost a fifth of its throughput.
  std::nth_element(sorted.begin(), sorted.begin() + n / 4, sorted.begin() + n);
  return sorted[static_cast<std::size_t>(n / 4)];
}

int64_t BatchSizeTuner::cost_of(int size) const {
  return cost(buckets_[bucket_of(size)]);
}

int BatchSizeTuner::next_limit() const {
  const Bucket& best = buckets_[best_];
  if (best.count < min_samples) return best.size;
  const bool has_up = best_ + 1 < buckets_.size();
  const bool has_down = best_ > 0;
  if (!has_up && !has_down) return best.size;
  const bool up_unknown = has_up && buckets_[best_ + 1].count < min_samples;
  const bool down_unknown = has_down && buckets_[best_ - 1].count < min_samples;
  const int every = up_unknown || down_unknown ? explore_every : interval_;
  if (since_probe_ + 1 < every) return best.size;
  bool up;
  if (up_unknown != down_unknown)
    up = up_unknown;
  else if (has_up != has_down)
    up = has_up;
  else
    up = probes_ % 2 == 0;  // both known: alternate
  return buckets_[up ? best_ + 1 : best_ - 1].size;
}

void BatchSizeTuner::record(int size, int64_t cycle_ns) {
  if (size < 1 || cycle_ns <= 0) return;
  const std::size_t measured = bucket_of(size);
  Bucket& b = buckets_[measured];
  b.per_request[static_cast<std::size_t>(b.next)] = cycle_ns / size;
  b.next = (b.next + 1) % kept_samples;
  b.count = std::min(b.count + 1, 1 << 20);
  const bool probe = measured != best_;
  if (probe) {
    since_probe_ = 0;
    ++probes_;
  } else {
    ++since_probe_;
  }
  if (choose_best())
    interval_ = refresh_every;
  else if (probe)
    interval_ = std::min(2 * interval_, max_refresh_every);
}

bool BatchSizeTuner::choose_best() {
  const int64_t current = cost(buckets_[best_]);
  if (current == 0) return false;
  std::size_t chosen = best_;
  double chosen_cost = static_cast<double>(current);
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    const int64_t c = cost(buckets_[i]);
    if (i == best_ || c == 0) continue;
    // Larger batches cost latency: a larger size must be clearly cheaper, a smaller one only
    // as cheap.
    const double needed = static_cast<double>(current) * (i > best_ ? 1 - margin : 1.0);
    if (static_cast<double>(c) <= needed && static_cast<double>(c) < chosen_cost) {
      chosen = i;
      chosen_cost = static_cast<double>(c);
    }
  }
  if (chosen == best_) return false;
  best_ = chosen;
  return true;
}

}  // namespace troupe::actors
