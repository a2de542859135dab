// The ordinary streams give way to the top priority level's stream (engine/graph/stream_yield.hpp):
// while k top runs are in progress, streams 0..k-1 hold at their next node boundary; the others,
// and every stream once the runs end, pass.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/graph/stream_yield.hpp"

namespace troupe::detail {
namespace {

// Whether stream `stream` passes its checkpoint within `ms` (the thread is joined either way).
bool passes_within(StreamYield& yield, int stream, int ms, StreamYield* release_after = nullptr) {
  std::atomic<bool> passed{false};
  std::thread t([&] {
    yield.checkpoint(stream);
    passed = true;
  });
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!passed && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const bool result = passed;
  if (!result && release_after) release_after->end_top_run();
  t.join();
  return result;
}

TEST(StreamYield, TheFirstStreamsHoldWhileTopRunsAreInProgress) {
  StreamYield yield;
  EXPECT_TRUE(passes_within(yield, 0, 5000));
  yield.begin_top_run();
  EXPECT_TRUE(passes_within(yield, 1, 5000));
  // Stream 0 holds until the run ends (ended here after 100 ms, which lets it pass).
  EXPECT_FALSE(passes_within(yield, 0, 100, &yield));
  EXPECT_TRUE(passes_within(yield, 0, 5000));
  yield.begin_top_run();
  yield.begin_top_run();
  EXPECT_TRUE(passes_within(yield, 2, 5000));
  EXPECT_FALSE(passes_within(yield, 1, 100, &yield));  // two runs: 0 and 1 hold; one ends
  EXPECT_TRUE(passes_within(yield, 1, 5000));
  yield.end_top_run();
  EXPECT_TRUE(passes_within(yield, 0, 5000));
}

}  // namespace
}  // namespace troupe::detail
