#pragma once

// TfIdfVectorizer's n-gram pool, read and checked once from the node's attributes for both its
// schema and its reference kernel, so that the two always agree on what the pool holds and on the
// output's size.

#include <cstdint>
#include <map>
#include <vector>

#include "troupe/model.hpp"

namespace troupe::text {

enum class WeightMode { tf, idf, tfidf };

/// The pool of an integer TfIdfVectorizer (ONNX opset 9). The pool's n-grams are numbered in the
/// order pool_int64s lists them (the 1-grams, then the 2-grams, ...); n-gram k counts towards
/// output coordinate `output_index[k]`, scaled by `weights[k]`.
struct NgramPool {
  WeightMode mode = WeightMode::tf;
  int64_t min_gram_length = 1;
  int64_t max_gram_length = 1;
  int64_t max_skip_count = 0;
  /// by_length[n - 1]: the pool's n-grams (their tokens) and each one's number.
  std::vector<std::map<std::vector<int64_t>, size_t>> by_length;
  std::vector<int64_t> output_index;  // ngram_indexes
  std::vector<double> weights;        // one per n-gram; all 1 when the node sets none
  int64_t output_size = 0;            // max(ngram_indexes) + 1
};

/// Reads mode, min_gram_length, max_gram_length, max_skip_count, ngram_counts, ngram_indexes,
/// pool_int64s and weights. Throws ModelError naming the node and the attribute when one is
/// missing or inconsistent, UnsupportedOperation for a string pool (pool_strings).
NgramPool read_ngram_pool(const Node& node);

/// The output row of one input row: each pool n-gram found in `row` with up to max_skip_count
/// tokens skipped between its items counts once per (start, skip) at which it is found (a 1-gram
/// once per position, skips being meaningless for it); IDF then clips every count to 1, and IDF
/// and TFIDF scale it by the n-gram's weight. Pool n-grams sharing an output coordinate add up.
std::vector<double> vectorize(const NgramPool& pool, const std::vector<int64_t>& row);

}  // namespace troupe::text
