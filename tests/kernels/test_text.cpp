// TfIdfVectorizer: shape inference, the attribute checks and the reference kernel, on counts
// worked out by hand. The pool used by most cases: the 1-grams 7 and 5 and the 2-grams (7, 3) and
// (3, 5), n-grams 0 to 3 in that order.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/kernels/reference_op_runner.hpp"
#include "troupe/error.hpp"

namespace troupe::test {
namespace {

using ints_t = std::vector<int64_t>;

Attributes pool(const std::string& mode, int64_t min_gram, int64_t max_gram, int64_t max_skip) {
  return {{"mode", mode},
          {"min_gram_length", min_gram},
          {"max_gram_length", max_gram},
          {"max_skip_count", max_skip},
          {"ngram_counts", ints_t{0, 2}},
          {"ngram_indexes", ints_t{0, 1, 2, 3}},
          {"pool_int64s", ints_t{7, 5, 7, 3, 3, 5}}};
}

// 7 twice, 5 once; (7, 3) at positions (0, 1) and (2, 3), (3, 5) at (3, 4). Two skipped tokens
// add (7, 3) at (0, 3) and (3, 5) at (1, 4); one skipped token finds neither.
Tensor row() {
  return i64({5}, {7, 3, 7, 3, 5});
}

TEST(TfIdfVectorizer, TermFrequencyCountsEachSkip) {
  expect_tensor(run1("TfIdfVectorizer", {input(row())}, pool("TF", 1, 2, 0)), F32, {4},
                {2, 1, 2, 1});
  expect_tensor(run1("TfIdfVectorizer", {input(row())}, pool("TF", 1, 2, 1)), F32, {4},
                {2, 1, 2, 1});
  // A 1-gram counts once per position whatever the skips; a 2-gram once per (start, skip).
  expect_tensor(run1("TfIdfVectorizer", {input(row())}, pool("TF", 1, 2, 2)), F32, {4},
                {2, 1, 3, 2});
  // Only 2-grams.
  expect_tensor(run1("TfIdfVectorizer", {input(row())}, pool("TF", 2, 2, 2)), F32, {4},
                {0, 0, 3, 2});
  // Only 1-grams; a longer max_gram_length than the pool has lengths finds nothing more.
  expect_tensor(run1("TfIdfVectorizer", {input(row())}, pool("TF", 1, 1, 2)), F32, {4},
                {2, 1, 0, 0});
  expect_tensor(run1("TfIdfVectorizer", {input(row())}, pool("TF", 2, 5, 0)), F32, {4},
                {0, 0, 2, 1});
}

TEST(TfIdfVectorizer, IdfClipsCountsAndTfIdfScalesThem) {
  Attributes idf = pool("IDF", 1, 2, 2);
  idf.set("weights", std::vector<double>{0.5, 2, 0.25, 4});
  // Counts 2, 1, 3, 2 clipped to 1 each, times the weights.
  expect_tensor(run1("TfIdfVectorizer", {input(row())}, idf), F32, {4}, {0.5, 2, 0.25, 4});
  Attributes tfidf = idf;
  tfidf.set("mode", std::string("TFIDF"));
  expect_tensor(run1("TfIdfVectorizer", {input(row())}, tfidf), F32, {4}, {1, 2, 0.75, 8});
  // Without weights IDF marks presence.
  expect_tensor(run1("TfIdfVectorizer", {input(i64({3}, {5, 5, 1}))}, pool("IDF", 1, 2, 0)), F32,
                {4}, {0, 1, 0, 0});
}

TEST(TfIdfVectorizer, RowsOfABatchAreCountedApart) {
  // (3, 5) spans the rows' boundary in the flat data (3 ends row 0, 5 starts row 1): not counted.
  const Tensor x = i32({2, 3}, {7, 3, 3, 5, 5, 7});
  expect_tensor(run1("TfIdfVectorizer", {input(x)}, pool("TF", 1, 2, 0)), F32, {2, 4},
                {1, 0, 1, 0, 1, 2, 0, 0});
}

TEST(TfIdfVectorizer, NgramIndexesPlaceAndShareCoordinates) {
  // n-gram 0 (7) goes to coordinate 3, n-gram 1 (5) to 0, both 2-grams to 1; nothing reaches 2.
  Attributes a = pool("TF", 1, 2, 0);
  a.set("ngram_indexes", ints_t{3, 0, 1, 1});
  expect_tensor(run1("TfIdfVectorizer", {input(row())}, a), F32, {4}, {1, 3, 0, 2});
}

TEST(TfIdfVectorizer, TrigramsWithSkips) {
  // Pool: the 3-grams (1, 2, 3) and (1, 3, 2); no 1- or 2-grams.
  const Attributes a{{"mode", std::string("TF")},
                     {"min_gram_length", int64_t{3}},
                     {"max_gram_length", int64_t{3}},
                     {"max_skip_count", int64_t{1}},
                     {"ngram_counts", ints_t{0, 0, 0}},
                     {"ngram_indexes", ints_t{0, 1}},
                     {"pool_int64s", ints_t{1, 2, 3, 1, 3, 2}}};
  // (1, 2, 3) at (0, 1, 2) and (3, 4, 5); with one skip (1, 3, 2) at (0, 2, 4).
  expect_tensor(run1("TfIdfVectorizer", {input(i64({6}, {1, 2, 3, 1, 2, 3}))}, a), F32, {2},
                {2, 1});
}

TEST(TfIdfVectorizer, ShapesFollowTheInputsRank) {
  const Attributes a = pool("TF", 1, 2, 0);
  EXPECT_EQ(infer_shape("TfIdfVectorizer", {declared(I32, {Shape::dynamic})}, a), (Shape{4}));
  const std::vector<ValueInfo> out =
      infer("TfIdfVectorizer", {declared(I64, {Shape::dynamic, 9})}, a);
  EXPECT_EQ(out.at(0).type, F32);
  EXPECT_EQ(out.at(0).shape, (Shape{Shape::dynamic, 4}));
  Attributes wide = a;
  wide.set("ngram_indexes", ints_t{0, 1, 2, 10});
  EXPECT_EQ(infer_shape("TfIdfVectorizer", {declared(I64, {2, 9})}, wide), (Shape{2, 11}));
}

TEST(TfIdfVectorizer, StringPoolIsRefusedNamingTheAttribute) {
  Attributes a = pool("TF", 1, 2, 0);
  a.erase("pool_int64s");
  a.set("pool_strings", std::vector<std::string>{"a", "b", "a", "c", "c", "b"});
  expect_error<UnsupportedOperation>(
      [&] { infer("TfIdfVectorizer", {declared(I64, {5})}, a); },
      {"TfIdfVectorizer node 'node'", "'pool_strings'", "not supported"});
}

// Runs shape inference with `a` changed by `change` and expects a ModelError naming the node and
// saying `what`.
template <class Change>
void expect_refused(Change change, const std::string& what, Shape shape = Shape{5},
                    ElementType type = I64) {
  Attributes a = pool("TF", 1, 2, 0);
  change(a);
  expect_error<ModelError>([&] { infer("TfIdfVectorizer", {declared(type, shape)}, a); },
                           {"TfIdfVectorizer node 'node'", what});
}

TEST(TfIdfVectorizer, BadAttributesAndInputsAreNamed) {
  expect_refused([](Attributes& a) { a.set("mode", std::string("BM25")); },
                 "attribute 'mode' is 'BM25', expected TF, IDF or TFIDF");
  expect_refused([](Attributes& a) { a.erase("max_skip_count"); },
                 "attribute 'max_skip_count' is required");
  expect_refused([](Attributes& a) { a.set("min_gram_length", int64_t{0}); },
                 "attribute 'min_gram_length' is 0, expected at least 1");
  expect_refused([](Attributes& a) { a.set("max_gram_length", int64_t{0}); },
                 "attribute 'max_gram_length' is 0, expected at least 1");
  expect_refused([](Attributes& a) { a.set("max_skip_count", int64_t{-1}); },
                 "attribute 'max_skip_count' is -1");
  expect_refused([](Attributes& a) { a.erase("pool_int64s"); },
                 "attribute 'pool_int64s' is required");
  expect_refused([](Attributes& a) { a.set("pool_strings", std::vector<std::string>{"a"}); },
                 "'pool_strings' and 'pool_int64s' are both set");
  expect_refused(
      [](Attributes& a) {
        a.set("ngram_counts", ints_t{0, 3});
      },
      "holds 3 values for the 2-grams");
  expect_refused(
      [](Attributes& a) {
        a.set("ngram_counts", ints_t{1, 2});
      },
      "'ngram_counts' [1,2] must start at 0");
  expect_refused(
      [](Attributes& a) {
        a.set("ngram_counts", ints_t{0, 8});
      },
      "must start at 0 and rise to at most the pool's size 6");
  expect_refused(
      [](Attributes& a) {
        a.set("ngram_indexes", ints_t{0, 1, 2});
      },
      "'ngram_indexes' has 3 entries, expected one per n-gram of the pool (4)");
  expect_refused(
      [](Attributes& a) {
        a.set("ngram_indexes", ints_t{0, -1, 2, 3});
      },
      "'ngram_indexes' has the entry -1, outside [0, ");
  expect_refused(
      [](Attributes& a) {
        a.set("weights", std::vector<double>{1, 2});
      },
      "'weights' has 2 entries");
  expect_refused(
      [](Attributes& a) {
        a.set("pool_int64s", ints_t{7, 7, 7, 3, 3, 5});
      },
      "lists the 1-gram [7] twice");
  expect_refused([](Attributes& a) { a.set("ngram_counts", ints_t{}); }, "'ngram_counts' is empty");
  expect_refused([](Attributes&) {}, "expected i32 or i64", Shape{5}, F32);
  expect_refused([](Attributes&) {}, "expected [C] or [N, C]", Shape{1, 2, 5});
}

}  // namespace
}  // namespace troupe::test
