#pragma once

// How large a batch pays off for this model, on this machine, under this load: learned from the
// batches that ran, because it cannot be known beforehand. Merging requests saves per-run costs
// (message hops, thread wake-ups, kernel launches), which dominate a small model; a large model
// is compute bound, and its per-request cost may grow with the batch (activations falling out of
// the caches), so batching it up to max_batch_size can make it slower than not batching at all.
//
// The measure is a batch's credit cycle (released by the scheduler until its credit comes back)
// divided by its size: with every credit busy, requests per second are credits / that. Sizes are
// grouped in buckets 1, 2, 4, ... and max_batch_size; each keeps its last few measures, and the
// lower quartile of them is its cost. The limit is the cheapest bucket measured (a larger one must
// be cheaper by a margin, since it costs latency; a smaller one only as cheap). Now and then one
// batch runs under a neighbouring bucket's size to measure it: every other batch while the
// neighbour has too few measures, then every 16th, backing off to every 256th while the
// measures keep confirming the choice (each such batch is slower for the requests in it). So the
// limit climbs while larger batches pay and comes back down when they stop paying. A batch whose
// run built a shape specialization (its size's first on its stream, ~100 ms on ResNet-50) is not
// recorded: the scheduler skips it, or a size's first measures would hide what it costs later.
// Time is a parameter: the tuner is tested without a clock.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace troupe::actors {

class BatchSizeTuner {
 public:
  /// Buckets up to `max_batch_size`; starts at 1 with nothing measured.
  explicit BatchSizeTuner(int max_batch_size = 1);

  /// The size limit for the batches the scheduler releases until the next record().
  int next_limit() const;
  /// A batch of `size` requests came back `cycle_ns` after it was released.
  void record(int size, int64_t cycle_ns);

  /// The size the tuner currently believes best (the limit between measuring batches).
  int best_size() const { return buckets_[best_].size; }
  /// The cost per request (ns, the lower quartile of its last measures) of the bucket holding
  /// `size`; 0 while it has fewer than `min_samples` measures.
  int64_t cost_of(int size) const;

  static constexpr int min_samples = 3;     // measures before a bucket's cost counts
  static constexpr int kept_samples = 8;    // the most recent measures each bucket keeps
  static constexpr int explore_every = 2;   // batches between measuring ones, neighbour unknown
  static constexpr int refresh_every = 16;  // the same once both neighbours are known,
  static constexpr int max_refresh_every = 256;  // doubling up to this while the choice holds
  static constexpr double margin = 0.10;  // how much cheaper a larger size must be to take over

 private:
  struct Bucket {
    int size = 1;
    std::array<int64_t, kept_samples> per_request{};  // ring of the last measures
    int count = 0;                                    // measures taken (saturates)
    int next = 0;                                     // ring position of the next one
  };
  std::size_t bucket_of(int size) const;
  int64_t cost(const Bucket& b) const;
  bool choose_best();  // true when the best bucket changed

  std::vector<Bucket> buckets_;
  std::size_t best_ = 0;
  int since_probe_ = 0;           // batches measured in the best bucket since the last probe
  uint64_t probes_ = 0;           // batches measured in another bucket
  int interval_ = refresh_every;  // batches between probes once the neighbours are known
};

}  // namespace troupe::actors
