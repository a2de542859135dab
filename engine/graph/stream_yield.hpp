#pragma once

// The other streams give way while the top priority level's own stream runs
// (top_priority_stream). Without it the urgent run shared two cores three ways and took 1.6x
// its time on an idle model (ResNet-50), longer than waiting for a stream to free up. So for each
// run in progress on that stream, one other stream (lowest index first) holds still at its next
// node boundary until the run ends: the urgent request gets a core of its own, the stream that
// waits loses what the urgent run gains, and no request is ever stopped inside a kernel.

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace troupe::detail {

class StreamYield {
 public:
  void begin_top_run() {
    std::lock_guard<std::mutex> lock(mutex_);
    top_runs_.fetch_add(1, std::memory_order_release);
  }
  void end_top_run() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      top_runs_.fetch_sub(1, std::memory_order_release);
    }
    cv_.notify_all();
  }
  /// Called by stream `stream` between two nodes; returns at once unless it is to give way.
  void checkpoint(int stream) {
    if (stream >= top_runs_.load(std::memory_order_acquire)) return;
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return stream >= top_runs_.load(std::memory_order_acquire); });
  }

 private:
  std::atomic<int> top_runs_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
};

/// A run on the top priority level's stream, for its scope (none when `yield` is null).
class TopRun {
 public:
  explicit TopRun(StreamYield* yield) : yield_(yield) {
    if (yield_) yield_->begin_top_run();
  }
  ~TopRun() {
    if (yield_) yield_->end_top_run();
  }
  TopRun(const TopRun&) = delete;
  TopRun& operator=(const TopRun&) = delete;

 private:
  StreamYield* yield_;
};

}  // namespace troupe::detail
