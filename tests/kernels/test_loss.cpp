// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: shape inference and reference kernels,
// on values worked out by hand.

#include <gtest/gtest.h>

#include <cmath>

#include "tests/kernels/reference_op_runner.hpp"
#include "troupe/error.hpp"

namespace troupe::test {
namespace {

// Log-probabilities of 2 samples over 3 classes; the targets pick -3 and -0.5.
Tensor log_probs() {
  return f32({2, 3}, {-1, -2, -3, -0.5, -1.5, -2.5});
}
Tensor targets() {
  return i64({2}, {2, 0});
}

Attributes reduction(const std::string& r) {
  return {{"reduction", r}};
}

TEST(NegativeLogLikelihoodLoss, EachReduction) {
  expect_tensor(
      run1("NegativeLogLikelihoodLoss", {input(log_probs()), input(targets())}, reduction("none")),
      F32, {2}, {3, 0.5});
  expect_tensor(
      run1("NegativeLogLikelihoodLoss", {input(log_probs()), input(targets())}, reduction("sum")),
      F32, Shape{}, {3.5});
  // "mean" is the default.
  expect_tensor(run1("NegativeLogLikelihoodLoss", {input(log_probs()), input(targets())}), F32,
                Shape{}, {1.75});
}

TEST(NegativeLogLikelihoodLoss, WeightsScaleTheLossAndTheMeansDenominator) {
  const Tensor weight = f32({3}, {1, 2, 4});
  expect_tensor(run1("NegativeLogLikelihoodLoss",
                     {input(log_probs()), input(targets()), input(weight)}, reduction("none")),
                F32, {2}, {12, 0.5});
  // (12 + 0.5) / (4 + 1)
  expect_tensor(
      run1("NegativeLogLikelihoodLoss", {input(log_probs()), input(targets()), input(weight)}), F32,
      Shape{}, {2.5});
}

TEST(NegativeLogLikelihoodLoss, AnIgnoredTargetAddsNothingAndWeighsNothing) {
  Attributes attributes{{"ignore_index", int64_t{2}}};
  expect_tensor(
      run1("NegativeLogLikelihoodLoss", {input(log_probs()), input(targets())}, attributes), F32,
      Shape{}, {0.5});
  // An ignored target may lie outside the classes.
  attributes = {{"ignore_index", int64_t{-1}}, {"reduction", std::string("none")}};
  expect_tensor(
      run1("NegativeLogLikelihoodLoss", {input(log_probs()), input(i64({2}, {-1, 1}))}, attributes),
      F32, {2}, {0, 1.5});
}

TEST(NegativeLogLikelihoodLoss, SpatialTargetsKeepTheirShape) {
  // [N=1, C=2, d=2]: position 0 picks class 1, position 1 class 0.
  expect_tensor(run1("NegativeLogLikelihoodLoss",
                     {input(f32({1, 2, 2}, {-1, -2, -3, -4})), input(i64({1, 2}, {1, 0}))},
                     reduction("none")),
                F32, {1, 2}, {3, 2});
}

TEST(NegativeLogLikelihoodLoss, BadInputIsNamed) {
  expect_error<ExecutionError>(
      [] {
        run1("NegativeLogLikelihoodLoss", {input(log_probs()), input(i64({2}, {3, 0}))});
      },
      {"NegativeLogLikelihoodLoss node 'node'", "target 3", "[0, 3)"});
  expect_error<ModelError>(
      [] {
        infer("NegativeLogLikelihoodLoss", {declared(F32, {2, 3}), declared(I64, {2})},
              reduction("avg"));
      },
      {"reduction is 'avg'"});
  expect_error<ModelError>(
      [] {
        infer("NegativeLogLikelihoodLoss", {declared(F32, {2, 3, 4}), declared(I64, {2, 5})});
      },
      {"[2,5]", "does not match the scores [2,3,4]"});
  expect_error<ModelError>(
      [] {
        infer("NegativeLogLikelihoodLoss",
              {declared(F32, {2, 3}), declared(I64, {2}), declared(F32, {4})});
      },
      {"one weight per class (3)"});
}

TEST(SoftmaxCrossEntropyLoss, LossAndLogProbabilities) {
  // Position 0: scores (0, 0), softmax (1/2, 1/2). Position 1: scores (0, ln 3), softmax
  // (1/4, 3/4). Targets 1 and 0: losses ln 2 and ln 4.
  const Tensor scores = f32({1, 2, 2}, {0, 0, 0, static_cast<float>(std::log(3.0))});
  const auto outs = run("SoftmaxCrossEntropyLoss", {input(scores), input(i64({1, 2}, {1, 0}))},
                        reduction("none"), 2);
  expect_tensor(outs.at(0), F32, {1, 2}, {std::log(2.0), std::log(4.0)}, 1e-6);
  expect_tensor(outs.at(1), F32, {1, 2, 2},
                {-std::log(2.0), -std::log(4.0), -std::log(2.0), -std::log(4.0 / 3.0)}, 1e-6);
  expect_tensor(run1("SoftmaxCrossEntropyLoss", {input(scores), input(i64({1, 2}, {1, 0}))}), F32,
                Shape{}, {(std::log(2.0) + std::log(4.0)) / 2}, 1e-6);
}

TEST(SoftmaxCrossEntropyLoss, LargeScoresDoNotOverflow) {
  expect_tensor(run1("SoftmaxCrossEntropyLoss",
                     {input(f32({1, 3}, {1000, 1000, 1000})), input(i64({1}, {2}))}),
                F32, Shape{}, {std::log(3.0)}, 1e-6);
}

}  // namespace
}  // namespace troupe::test
