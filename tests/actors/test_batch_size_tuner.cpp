// The batch size tuner (actors/batch_size_tuner.hpp) on simulated models: each batch's credit
// cycle comes from a cost function of its size, so what the tuner learns is checked without a
// clock or a pipeline.

#include <gmock/gmock.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "actors/batch_size_tuner.hpp"

using namespace troupe::actors;

namespace {

using CycleNs = std::function<int64_t(int size)>;

// A model whose runs cost a fixed overhead (hops, wake-ups) plus a little per request: batching
// pays all the way.
int64_t hop_bound(int size) {
  return 100'000 + 5'000 * size;
}

// A compute-bound model whose per-request time grows with the batch (activations leave the
// caches): batching never pays.
int64_t compute_bound(int size) {
  return static_cast<int64_t>(size * 50e6 * (1 + 0.1 * std::log2(size)));
}

// Runs `batches` batches of the size the tuner asks for (the queue always has enough); returns
// how many batches ran at each size.
std::map<int, int> run(BatchSizeTuner& tuner, int batches, const CycleNs& cycle) {
  std::map<int, int> sizes;
  for (int i = 0; i < batches; ++i) {
    const int size = tuner.next_limit();
    ++sizes[size];
    tuner.record(size, cycle(size));
  }
  return sizes;
}

}  // namespace

TEST(BatchSizeTuner, StartsUnbatchedAndClimbsToTheMaximumWhileLargerBatchesPay) {
  BatchSizeTuner tuner(32);
  EXPECT_EQ(tuner.next_limit(), 1);
  run(tuner, 60, hop_bound);
  EXPECT_EQ(tuner.best_size(), 32);
  // Once there, nearly every batch runs at the maximum: the measuring ones try 16 now and then,
  // ever more rarely while 32 stays the best.
  const auto sizes = run(tuner, 1000, hop_bound);
  EXPECT_EQ(sizes.size(), 2u);
  EXPECT_GE(sizes.at(16), 3);
  EXPECT_LE(sizes.at(16), 1000 / BatchSizeTuner::refresh_every);
}

TEST(BatchSizeTuner, AComputeBoundModelStaysUnbatchedAndOnlyRarelyTriesTwo) {
  BatchSizeTuner tuner(8);
  const auto learning = run(tuner, 20, compute_bound);
  EXPECT_EQ(tuner.best_size(), 1);
  EXPECT_EQ(learning.count(4), 0u);  // 2 did not pay, so 4 is never tried
  const auto sizes = run(tuner, 2000, compute_bound);
  EXPECT_EQ(tuner.best_size(), 1);
  ASSERT_EQ(sizes.size(), 2u);
  // Every 16th, 32nd, ... batch measures 2 again, backing off to every 256th.
  EXPECT_GE(sizes.at(2), 5);
  EXPECT_LE(sizes.at(2), 20);
}

TEST(BatchSizeTuner, ComesBackDownWhenLargeBatchesStopPaying) {
  BatchSizeTuner tuner(32);
  run(tuner, 100, hop_bound);
  ASSERT_EQ(tuner.best_size(), 32);
  // The same sizes now cost as a compute-bound model's (another model took the caches, say).
  run(tuner, 2000, compute_bound);
  EXPECT_EQ(tuner.best_size(), 1);
}

TEST(BatchSizeTuner, NoiseOnAComputeBoundModelDoesNotMakeItBatch) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(0.9, 1.1);  // +-10% per batch
  auto noisy = [&](int size) {
    return static_cast<int64_t>(static_cast<double>(compute_bound(size)) * noise(rng));
  };
  BatchSizeTuner tuner(8);
  const auto sizes = run(tuner, 2000, noisy);
  EXPECT_GE(sizes.at(1), 2000 * 9 / 10);
}

TEST(BatchSizeTuner, EpisodesOfInterferenceDoNotMoveItToASizeMeasuredBeforeThem) {
  // Now and then something else takes the cores for a while, and a few batches in a row take
  // twice as long. The neighbour's measures are from before the episode: comparing the chosen
  // size's inflated cost with them would make a worse size look better.
  BatchSizeTuner tuner(32);
  run(tuner, 200, hop_bound);
  ASSERT_EQ(tuner.best_size(), 32);
  int batch = 0;
  int at_best = 0;
  for (int episode = 0; episode < 20; ++episode) {
    for (int i = 0; i < 40; ++i, ++batch) {
      const int size = tuner.next_limit();
      const bool disturbed = i < BatchSizeTuner::kept_samples / 2;
      tuner.record(size, hop_bound(size) * (disturbed ? 2 : 1));
      if (tuner.best_size() == 32) ++at_best;
    }
  }
  EXPECT_EQ(at_best, batch);
}

TEST(BatchSizeTuner, AMaximumThatIsNoPowerOfTwoIsABucketOfItsOwn) {
  BatchSizeTuner tuner(24);
  run(tuner, 100, hop_bound);
  EXPECT_EQ(tuner.best_size(), 24);
  for (int i = 0; i < 100; ++i) EXPECT_LE(tuner.next_limit(), 24);
}

TEST(BatchSizeTuner, ABatchSmallerThanItsLimitCountsForTheSizeItHad) {
  BatchSizeTuner tuner(8);
  // Batches of 3 (the queue never held more) are measured in bucket 2, not in bucket 4.
  for (int i = 0; i < 5; ++i) tuner.record(3, 3 * 1'000'000);
  EXPECT_EQ(tuner.cost_of(2), 1'000'000);
  EXPECT_EQ(tuner.cost_of(3), 1'000'000);
  EXPECT_EQ(tuner.cost_of(4), 0);  // nothing measured there
}

TEST(BatchSizeTuner, OfTwoSizesThatCostTheSameTheSmallerWins) {
  // Per request, batches of 1, 2 and 4 cost the same: larger ones would only add latency.
  BatchSizeTuner tuner(8);
  run(tuner, 500, [](int size) { return int64_t{10'000'000} * size; });
  EXPECT_EQ(tuner.best_size(), 1);
}

TEST(BatchSizeTuner, WithoutBatchingTheLimitIsOne) {
  BatchSizeTuner tuner(1);
  run(tuner, 50, hop_bound);
  EXPECT_EQ(tuner.next_limit(), 1);
}
