// Schemas of TfIdfVectorizer (ONNX opset 9) over integer tokens, with the n-gram pool its kernel
// shares (text.hpp), and of StringNormalizer (string_normalizer.hpp). TfIdfVectorizer's string
// pools (pool_strings) are refused.
#include "engine/ops/text.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"
#include "engine/ops/spatial.hpp"
#include "engine/ops/string_normalizer.hpp"

namespace troupe {

namespace text {

namespace {

int64_t required_int(const Node& node, const std::string& name, int64_t min_value) {
  if (!node.attributes.has(name)) spatial::fail(node, "attribute '" + name + "' is required");
  const int64_t value = node.attributes.get_int(name);
  if (value < min_value)
    spatial::fail(node, "attribute '" + name + "' is " + std::to_string(value) +
                            ", expected at least " + std::to_string(min_value));
  return value;
}

std::vector<int64_t> required_ints(const Node& node, const std::string& name) {
  if (!node.attributes.has(name)) spatial::fail(node, "attribute '" + name + "' is required");
  return node.attributes.get_ints(name);
}

WeightMode read_mode(const Node& node) {
  if (!node.attributes.has("mode")) spatial::fail(node, "attribute 'mode' is required");
  const std::string mode = node.attributes.get_string("mode");
  if (mode == "TF") return WeightMode::tf;
  if (mode == "IDF") return WeightMode::idf;
  if (mode == "TFIDF") return WeightMode::tfidf;
  spatial::fail(node, "attribute 'mode' is '" + mode + "', expected TF, IDF or TFIDF");
}

// The pool's tokens. A string pool is valid ONNX, but troupe has no string tensors to match it
// against, so it is refused as unsupported rather than as malformed.
std::vector<int64_t> read_pool(const Node& node) {
  const bool strings = node.attributes.has("pool_strings");
  const bool ints = node.attributes.has("pool_int64s");
  if (strings && ints)
    spatial::fail(node,
                  "attributes 'pool_strings' and 'pool_int64s' are both set; ONNX allows one");
  if (strings)
    spatial::unsupported(node,
                         "attribute 'pool_strings' (a pool of string n-grams) is not supported; "
                         "troupe has no string tensors, only pool_int64s with i32/i64 input");
  if (!ints) spatial::fail(node, "attribute 'pool_int64s' is required (the n-gram pool)");
  return node.attributes.get_ints("pool_int64s");
}

// ngram_counts[n - 1] is where the n-grams start in the pool: the starts must rise from 0 and
// each length's stretch must hold whole n-grams.
std::vector<int64_t> read_ngram_counts(const Node& node, size_t pool_size) {
  const std::vector<int64_t> starts = required_ints(node, "ngram_counts");
  if (starts.empty() && pool_size > 0)
    spatial::fail(node, "attribute 'ngram_counts' is empty but pool_int64s holds " +
                            std::to_string(pool_size) + " values");
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t previous = k == 0 ? 0 : starts[k - 1];
    if ((k == 0 && starts[k] != 0) || starts[k] < previous ||
        starts[k] > static_cast<int64_t>(pool_size))
      spatial::fail(node, "attribute 'ngram_counts' " + spatial::to_string(starts) +
                              " must start at 0 and rise to at most the pool's size " +
                              std::to_string(pool_size));
  }
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t end = k + 1 < starts.size() ? starts[k + 1] : static_cast<int64_t>(pool_size);
    const auto length = static_cast<int64_t>(k + 1);
    if ((end - starts[k]) % length != 0)
      spatial::fail(node, "pool_int64s holds " + std::to_string(end - starts[k]) +
                              " values for the " + std::to_string(length) +
                              "-grams (ngram_counts " + spatial::to_string(starts) +
                              "), not a multiple of " + std::to_string(length));
  }
  return starts;
}

// The pool's n-grams by length, numbered in pool order.
std::vector<std::map<std::vector<int64_t>, size_t>> group_ngrams(
    const Node& node, const std::vector<int64_t>& pool, const std::vector<int64_t>& starts) {
  std::vector<std::map<std::vector<int64_t>, size_t>> by_length(starts.size());
  size_t number = 0;
  for (size_t k = 0; k < starts.size(); ++k) {
    const size_t length = k + 1;
    const size_t end = k + 1 < starts.size() ? static_cast<size_t>(starts[k + 1]) : pool.size();
    for (auto at = static_cast<size_t>(starts[k]); at < end; at += length, ++number) {
      std::vector<int64_t> ngram(pool.begin() + static_cast<std::ptrdiff_t>(at),
                                 pool.begin() + static_cast<std::ptrdiff_t>(at + length));
      // A repeated n-gram would have two output coordinates: the pool maps none.
      if (!by_length[k].emplace(ngram, number).second)
        spatial::fail(node, "pool_int64s lists the " + std::to_string(length) + "-gram " +
                                spatial::to_string(ngram) + " twice");
    }
  }
  return by_length;
}

size_t ngram_total(const std::vector<std::map<std::vector<int64_t>, size_t>>& by_length) {
  size_t total = 0;
  for (const auto& ngrams : by_length) total += ngrams.size();
  return total;
}

}  // namespace

NgramPool read_ngram_pool(const Node& node) {
  NgramPool pool;
  pool.mode = read_mode(node);
  pool.min_gram_length = required_int(node, "min_gram_length", 1);
  pool.max_gram_length = required_int(node, "max_gram_length", pool.min_gram_length);
  pool.max_skip_count = required_int(node, "max_skip_count", 0);
  const std::vector<int64_t> tokens = read_pool(node);
  pool.by_length = group_ngrams(node, tokens, read_ngram_counts(node, tokens.size()));
  const size_t total = ngram_total(pool.by_length);

  pool.output_index = required_ints(node, "ngram_indexes");
  if (pool.output_index.size() != total)
    spatial::fail(
        node, "attribute 'ngram_indexes' has " + std::to_string(pool.output_index.size()) +
                  " entries, expected one per n-gram of the pool (" + std::to_string(total) + ")");
  if (total == 0) spatial::fail(node, "the pool holds no n-gram, so the output has no size");
  for (int64_t index : pool.output_index)
    if (index < 0 || index == std::numeric_limits<int64_t>::max())
      spatial::fail(node, "attribute 'ngram_indexes' has the entry " + std::to_string(index) +
                              ", outside [0, " +
                              std::to_string(std::numeric_limits<int64_t>::max()) + ")");
  pool.output_size = *std::max_element(pool.output_index.begin(), pool.output_index.end()) + 1;

  pool.weights = node.attributes.get_floats_or("weights", std::vector<double>(total, 1.0));
  if (pool.weights.size() != total)
    spatial::fail(node, "attribute 'weights' has " + std::to_string(pool.weights.size()) +
                            " entries, expected one per n-gram of the pool (" +
                            std::to_string(total) + ")");
  return pool;
}

namespace {

// Counts, per pool n-gram, the n-grams of `length` items found in `row`. Items of one n-gram are
// skip + 1 positions apart; a 1-gram is the same at every skip, so it is counted at skip 0 only.
void count_ngrams(const NgramPool& pool, const std::vector<int64_t>& row, size_t length,
                  std::vector<int64_t>& counts) {
  const auto& ngrams = pool.by_length[length - 1];
  if (ngrams.empty()) return;
  const size_t size = row.size();
  const int64_t max_skip = length == 1 ? 0 : pool.max_skip_count;
  std::vector<int64_t> ngram(length);
  for (int64_t skip = 0; skip <= max_skip; ++skip) {
    const auto step = static_cast<size_t>(skip) + 1;
    // Past this skip no n-gram fits in the row, nor at any larger one.
    if ((length - 1) * step >= size) break;
    for (size_t start = 0; start + (length - 1) * step < size; ++start) {
      for (size_t j = 0; j < length; ++j) ngram[j] = row[start + j * step];
      const auto found = ngrams.find(ngram);
      if (found != ngrams.end()) ++counts[found->second];
    }
  }
}

}  // namespace

std::vector<double> vectorize(const NgramPool& pool, const std::vector<int64_t>& row) {
  std::vector<int64_t> counts(pool.output_index.size(), 0);
  const auto longest =
      std::min<int64_t>(pool.max_gram_length, static_cast<int64_t>(pool.by_length.size()));
  for (int64_t length = pool.min_gram_length; length <= longest; ++length)
    count_ngrams(pool, row, static_cast<size_t>(length), counts);
  std::vector<double> out(static_cast<size_t>(pool.output_size), 0.0);
  for (size_t k = 0; k < counts.size(); ++k) {
    double value = static_cast<double>(counts[k]);
    if (pool.mode == WeightMode::idf) value = std::min(value, 1.0);
    if (pool.mode != WeightMode::tf) value *= pool.weights[k];
    out[static_cast<size_t>(pool.output_index[k])] += value;
  }
  return out;
}

}  // namespace text

namespace {

// TfIdfVectorizer(X [C] or [N, C], i32 or i64) -> Y [max(ngram_indexes) + 1] or [N, that], f32.
std::vector<ValueInfo> infer_tfidf_vectorizer(const ShapeInferContext& ctx) {
  const text::NgramPool pool = text::read_ngram_pool(ctx.node);
  infer::require_type(ctx, 0, infer::TypeClass::index);
  const Shape& x = ctx.shape(0);
  if (x.rank() == 1) return {infer::value_info(ElementType::f32, Shape{pool.output_size})};
  if (x.rank() == 2) return {infer::value_info(ElementType::f32, Shape{x[0], pool.output_size})};
  ctx.fail("input X has shape " + x.to_string() + ", expected [C] or [N, C]");
}

// StringNormalizer(X [C] or [1, C], string) -> Y [C'] or [1, C']: C' is known when X is a
// constant (or nothing can be removed); otherwise the data decides it.
std::vector<ValueInfo> infer_string_normalizer(const ShapeInferContext& ctx) {
  const text::StringNormalizerSettings settings = text::read_string_normalizer(ctx.node);
  if (ctx.type(0) != ElementType::string)
    ctx.fail("input X has element type " + std::string(to_string(ctx.type(0))) +
             ", expected string");
  const Shape& x = ctx.shape(0);
  const bool two_dims = x.rank() == 2;
  if (!(x.rank() == 1 || (two_dims && (x[0] == 1 || x[0] == Shape::dynamic))))
    ctx.fail("input X has shape " + x.to_string() + ", expected [C] or [1, C]");
  const int64_t columns = x[x.rank() - 1];
  int64_t kept = Shape::dynamic;
  if (const Tensor* constant = ctx.constant(0)) {
    const Tensor dense = constant->contiguous();
    kept = static_cast<int64_t>(
        text::normalize_strings(settings, dense.data<std::string>(), dense.size()).size());
  } else if (settings.stopwords.empty() && columns != Shape::dynamic) {
    kept = columns;
  }
  if (kept == 0) kept = 1;  // an emptied row becomes one empty string
  return {infer::value_info(ElementType::string, two_dims ? Shape{1, kept} : Shape{kept})};
}

}  // namespace

void register_text_ops(OpSchemaRegistry& registry) {
  registry.add(OpSchema{"TfIdfVectorizer", 1, 1, 1, 1, infer_tfidf_vectorizer});
  registry.add(OpSchema{"StringNormalizer", 1, 1, 1, 1, infer_string_normalizer});
}

}  // namespace troupe
