// Priorities under overload: a high-priority client's latency with the model idle, then with a
// flood of low-priority requests that keeps the scheduler's queue full, same model, same run.
// Prints p50/p99 of the high-priority requests in both phases and their ratio, and what became of
// the flood (completed, refused with QueueFull).
//
// Usage: troupe_priority_overload MODEL.onnx [SECONDS=5] [FLOOD_IN_FLIGHT=128] [MAX_QUEUE=32]
//            [TOP_PRIORITY_STREAM=NO]
// The flood resubmits each request as soon as it completes (or is refused); the high-priority
// client runs one request at a time, as an interactive caller does.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/properties.hpp"

using namespace troupe;
using Clock = std::chrono::steady_clock;

namespace {

void fill_inputs(const CompiledModel& compiled, InferRequest& request, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (const ValueInfo& in : compiled.inputs()) {
    std::vector<int64_t> dims;
    for (int64_t d : in.shape.dims()) dims.push_back(d == Shape::dynamic ? 1 : d);
    Tensor t(ElementType::f32, Shape(dims));
    auto* p = static_cast<float*>(t.raw_data());
    for (int64_t i = 0; i < t.size(); ++i) p[i] = dist(rng);
    request.set_tensor(in.name, t);
  }
}

std::vector<double> high_priority_latencies(CompiledModel& compiled, double seconds) {
  InferRequest request = compiled.create_infer_request();
  fill_inputs(compiled, request, 1);
  request.set_priority(1);
  std::vector<double> us;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end && us.size() < 1'000'000) {
    const auto t0 = Clock::now();
    request.infer();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us;
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p / 100 * sorted.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s MODEL.onnx [SECONDS] [FLOOD_IN_FLIGHT] [MAX_QUEUE] "
                 "[TOP_PRIORITY_STREAM]\n",
                 argv[0]);
    return 2;
  }
  const double seconds = argc > 2 ? std::atof(argv[2]) : 5;
  const int flood = argc > 3 ? std::atoi(argv[3]) : 128;
  const int max_queue = argc > 4 ? std::atoi(argv[4]) : 32;
  const std::string top_stream = argc > 5 ? argv[5] : "NO";
  Core core;
  CompiledModel compiled = core.compile_model(argv[1], "CPU",
                                              {{props::performance_mode, "THROUGHPUT"},
                                               {"priority_levels", 2},
                                               {"default_priority_level", 2},
                                               {"max_queue_size", max_queue},
                                               {"top_priority_stream", top_stream}});

  high_priority_latencies(compiled, std::min(1.0, seconds / 5));  // warm-up
  const std::vector<double> idle = high_priority_latencies(compiled, seconds);

  std::atomic<bool> stop{false};
  std::atomic<long> done{0}, refused{0}, in_flight{0};
  std::vector<InferRequest> low(static_cast<size_t>(flood));
  for (size_t i = 0; i < low.size(); ++i) {
    low[i] = compiled.create_infer_request();
    fill_inputs(compiled, low[i], static_cast<unsigned>(i + 2));
  }
  // A completed (or refused) low-priority request is started again by a feeder thread: callbacks
  // must not call start_async on their own request.
  std::vector<std::atomic<bool>> ready(low.size());
  for (size_t i = 0; i < low.size(); ++i) {
    ready[i] = false;
    low[i].set_callback([&, i](std::exception_ptr error) {
      if (error) {
        try {
          std::rethrow_exception(error);
        } catch (const QueueFull&) {
          ++refused;
        } catch (...) {
        }
      } else {
        ++done;
      }
      --in_flight;
      ready[i] = true;
    });
    ++in_flight;
    low[i].start_async();
  }
  std::thread feeder([&] {
    while (!stop) {
      bool any = false;
      for (size_t i = 0; i < low.size(); ++i)
        if (ready[i].exchange(false)) {
          ++in_flight;
          low[i].start_async();
          any = true;
        }
      if (!any) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the queue fills
  const long done0 = done, refused0 = refused;
  const auto t0 = Clock::now();
  const std::vector<double> loaded = high_priority_latencies(compiled, seconds);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const long low_done = done - done0, low_refused = refused - refused0;
  stop = true;
  feeder.join();
  for (auto& r : low) {
    try {
      r.wait_for(std::chrono::seconds(30));
    } catch (const Error&) {
      // the last run of a flood request: refused or failed, counted above
    }
  }

  std::printf("high priority, idle model:   %zu requests, p50 %.0f us, p99 %.0f us\n", idle.size(),
              percentile(idle, 50), percentile(idle, 99));
  std::printf("high priority, under flood:  %zu requests, p50 %.0f us, p99 %.0f us\n",
              loaded.size(), percentile(loaded, 50), percentile(loaded, 99));
  std::printf("p99 ratio (flood / idle):    %.2f\n", percentile(loaded, 99) / percentile(idle, 99));
  std::printf(
      "low priority during flood:   %.0f completed/s, %.0f refused/s (QueueFull), %d in "
      "flight, max_queue_size %d\n",
      low_done / wall, low_refused / wall, flood, max_queue);
  return 0;
}
