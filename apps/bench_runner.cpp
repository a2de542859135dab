#include "apps/bench_runner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "apps/bench_clock.hpp"
#include "apps/bench_progress.hpp"
#include "engine/runtime/compiled_model_impl.hpp"

namespace troupe::apps {

double time_first_inference(InferRequest& request) {
  const auto start = BenchClock::now();
  request.infer();
  return ms_since(start);
}

Measurement run_measured_phase(const CompiledModel& compiled, std::vector<InferRequest>& requests,
                               const BenchOptions& o) {
  compiled.impl()->context().stats.reset();
  compiled.impl()->context().batch_fallbacks = 0;

  // Every request loops start_async -> callback -> restart, restarted from its own callback, as
  // benchmark_app does: a hand-over to this thread would add a thread wake-up to every request.
  // Callbacks of different requests may run at once (CALLBACK_THREAD=STAGE): each request keeps
  // its own latencies, merged at the end; failures are counted together.
  const bool time_limited = has_time_limit(o);
  const double limit_s = time_limit_s(o);
  Measurement m;
  std::vector<int64_t> started_ns(requests.size(), 0);
  std::vector<std::vector<double>> latencies(requests.size());
  for (auto& l : latencies)
    l.reserve((o.niter > 0 ? static_cast<size_t>(o.niter) : 1u << 16) / requests.size() + 1);
  std::mutex error_mutex;  // first_error
  std::atomic<size_t> failures{0};
  const int64_t begin_ns = now_ns();
  const int64_t deadline_ns =
      time_limited ? begin_ns + static_cast<int64_t>(limit_s * 1e9) : INT64_MAX;
  std::atomic<int64_t> started{0};
  std::mutex loop_mutex;
  std::condition_variable loop_done;
  int64_t in_flight = 0;  // under loop_mutex

  // Claims one more run within -niter and the time limit.
  auto claim_run = [&] {
    if (now_ns() >= deadline_ns) return false;
    if (o.niter <= 0) {
      started.fetch_add(1);
      return true;
    }
    int64_t n = started.load();
    while (n < o.niter)
      if (started.compare_exchange_weak(n, n + 1)) return true;
    return false;
  };
  auto finish_one = [&] {
    std::lock_guard<std::mutex> lock(loop_mutex);
    if (--in_flight == 0) loop_done.notify_all();
  };
  auto start = [&](size_t i) {
    started_ns[i] = now_ns();
    requests[i].start_async();
  };
  for (size_t i = 0; i < requests.size(); ++i)
    requests[i].set_callback([&, i](std::exception_ptr e) {
      const int64_t end_ns = now_ns();
      auto fail = [&](std::exception_ptr error) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!m.first_error) m.first_error = error;
        ++failures;
      };
      if (e)
        fail(e);
      else
        latencies[i].push_back(static_cast<double>(end_ns - started_ns[i]) / 1e6);
      if (failures == 0 && claim_run()) {
        try {
          start(i);
          return;
        } catch (...) {
          fail(std::current_exception());
        }
      }
      finish_one();
    });

  ProgressBar progress;
  auto progress_fraction = [&] {
    double f = 0;
    if (o.niter > 0) f = static_cast<double>(started.load()) / static_cast<double>(o.niter);
    if (time_limited) f = std::max(f, static_cast<double>(now_ns() - begin_ns) / (limit_s * 1e9));
    return f;
  };

  for (size_t i = 0; i < requests.size() && claim_run(); ++i) {
    {
      std::lock_guard<std::mutex> lock(loop_mutex);
      ++in_flight;
    }
    start(i);
  }
  {
    std::unique_lock<std::mutex> lock(loop_mutex);
    while (in_flight > 0) {
      loop_done.wait_for(lock, std::chrono::milliseconds(100));
      lock.unlock();
      progress.update(progress_fraction());
      lock.lock();
    }
  }
  for (auto& r : requests) {
    try {
      r.wait();
    } catch (...) {
    }
  }

  // Until every request has come back, so a time-limited run never reports less than its limit.
  const int64_t end_ns = now_ns();
  progress.finish();
  // Every callback has run (wait() waits for it); drop them, as they refer to this frame.
  for (auto& r : requests) r.set_callback(nullptr);
  for (const auto& l : latencies) m.latencies_ms.insert(m.latencies_ms.end(), l.begin(), l.end());
  m.failed = failures;
  m.duration_s = static_cast<double>(end_ns - begin_ns) / 1e9;
  return m;
}

std::string error_text(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace troupe::apps
