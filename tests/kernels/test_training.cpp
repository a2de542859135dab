// The optimizers of domain ai.onnx.preview.training (Adagrad, Momentum, Adam) and
// BatchNormalization with training_mode=1: shape inference and reference kernels, on values worked
// out by hand.

#include <gtest/gtest.h>

#include <cmath>

#include "tests/kernels/reference_op_runner.hpp"
#include "troupe/error.hpp"

namespace troupe::test {
namespace {

const std::string adagrad = "ai.onnx.preview.training::Adagrad";
const std::string momentum = "ai.onnx.preview.training::Momentum";
const std::string adam = "ai.onnx.preview.training::Adam";

Arg rate(float r) {
  return input(f32(Shape{}, {r}));
}
Arg step(int64_t t) {
  return input(i64(Shape{}, {t}));
}

TEST(Adagrad, TheLearningRateDecaysWithTheUpdateCount) {
  // r' = 0.1 / (1 + 1 * 1) = 0.05; H' = H + G^2 = (4, 9); X' = X - r' G / sqrt(H').
  const Attributes attributes{{"decay_factor", 1.0}, {"epsilon", 0.0}};
  const auto outs = run(adagrad,
                        {rate(0.1f), step(1), input(f32({2}, {1, 2})), input(f32({2}, {-1, 2})),
                         input(f32({2}, {3, 5}))},
                        attributes, 2);
  expect_tensor(outs.at(0), F32, {2}, {1 + 0.05 / 2, 2 - 0.05 * 2 / 3});
  expect_tensor(outs.at(1), F32, {2}, {4, 9});
}

TEST(Adagrad, RegularizesEachOfSeveralTensors) {
  // Inputs R, T, XA, XB, GA, GB, HA, HB; G' = 0.5 X + G: A (2), B (3, -2).
  const Attributes attributes{{"norm_coefficient", 0.5}, {"epsilon", 0.0}};
  const auto outs =
      run(adagrad,
          {rate(0.1f), step(0), input(f32({1}, {2})), input(f32({2}, {0, 4})), input(f32({1}, {1})),
           input(f32({2}, {3, -4})), input(f32({1}, {0})), input(f32({2}, {7, 0}))},
          attributes, 4);
  expect_tensor(outs.at(0), F32, {1}, {2 - 0.1 * 2 / 2});
  expect_tensor(outs.at(1), F32, {2}, {0 - 0.1 * 3 / 4, 4 + 0.1 * 2 / 2});
  expect_tensor(outs.at(2), F32, {1}, {4});
  expect_tensor(outs.at(3), F32, {2}, {16, 4});
}

Attributes momentum_attributes(const std::string& mode, double norm_coefficient = 0.0) {
  return {{"alpha", 0.5}, {"beta", 0.25}, {"norm_coefficient", norm_coefficient}, {"mode", mode}};
}

TEST(Momentum, TheGradientWeighsFullyAtTheFirstUpdateThenBeta) {
  const std::vector<Arg> tensors{input(f32({2}, {1, 2})), input(f32({2}, {1, -2})),
                                 input(f32({2}, {2, 4}))};
  auto args = [&](int64_t t) {
    std::vector<Arg> a{rate(0.1f), step(t)};
    a.insert(a.end(), tensors.begin(), tensors.end());
    return a;
  };
  // T = 0: V' = 0.5 V + G = (2, 0); X' = X - 0.1 V'.
  auto outs = run(momentum, args(0), momentum_attributes("standard"), 2);
  expect_tensor(outs.at(0), F32, {2}, {0.8, 2});
  expect_tensor(outs.at(1), F32, {2}, {2, 0});
  // T = 1: V' = 0.5 V + 0.25 G = (1.25, 1.5).
  outs = run(momentum, args(1), momentum_attributes("standard"), 2);
  expect_tensor(outs.at(0), F32, {2}, {0.875, 1.85});
  expect_tensor(outs.at(1), F32, {2}, {1.25, 1.5});
}

TEST(Momentum, NesterovStepsWithTheGradientAndTheNewMomentum) {
  // G' = 0.5 X + G = (1.5, -1); V' = 0.5 V + 0.25 G' = (1.375, 1.75);
  // X' = X - 0.1 (G' + 0.5 V') = (0.78125, 2.0125). R may be f64 too.
  const auto outs = run(momentum,
                        {input(f64(Shape{}, {0.1})), step(1), input(f64({2}, {1, 2})),
                         input(f64({2}, {1, -2})), input(f64({2}, {2, 4}))},
                        momentum_attributes("nesterov", 0.5), 2);
  expect_tensor(outs.at(0), F64, {2}, {0.78125, 2.0125}, 1e-12);
  expect_tensor(outs.at(1), F64, {2}, {1.375, 1.75}, 1e-12);
}

Attributes adam_attributes(double norm_coefficient_post = 0.0) {
  return {{"alpha", 0.5},
          {"beta", 0.75},
          {"epsilon", 0.0},
          {"norm_coefficient_post", norm_coefficient_post}};
}

std::vector<Arg> adam_args(int64_t t) {
  return {rate(0.1f),
          step(t),
          input(f32({2}, {1, -1})),
          input(f32({2}, {2, 0})),
          input(f32({2}, {0, 2})),
          input(f32({2}, {0, 4}))};
}

TEST(Adam, UpdatesBothMomentsAndCorrectsTheirBiasFromTheSecondUpdate) {
  // V' = 0.5 V + 0.5 G = (1, 1); H' = 0.75 H + 0.25 G^2 = (1, 3).
  auto outs = run(adam, adam_args(0), adam_attributes(), 3);
  expect_tensor(outs.at(0), F32, {2}, {1 - 0.1, -1 - 0.1 / std::sqrt(3.0)});
  expect_tensor(outs.at(1), F32, {2}, {1, 1});
  expect_tensor(outs.at(2), F32, {2}, {1, 3});
  // T = 2: r' = 0.1 sqrt(1 - 0.75^2) / (1 - 0.5^2).
  const double r = 0.1 * std::sqrt(1 - 0.5625) / 0.75;
  outs = run(adam, adam_args(2), adam_attributes(), 3);
  expect_tensor(outs.at(0), F32, {2}, {1 - r, -1 - r / std::sqrt(3.0)});
}

TEST(Adam, NormCoefficientPostShrinksTheResult) {
  const auto outs = run(adam, adam_args(0), adam_attributes(0.5), 3);
  expect_tensor(outs.at(0), F32, {2}, {0.5 * 0.9, 0.5 * (-1 - 0.1 / std::sqrt(3.0))});
}

TEST(Optimizers, TrailingOutputsMayBeLeftOff) {
  const auto outs = run(adam, adam_args(0), adam_attributes(), 1);
  ASSERT_EQ(outs.size(), 1u);
  expect_tensor(outs.at(0), F32, {2}, {0.9, -1 - 0.1 / std::sqrt(3.0)});
}

TEST(Optimizers, BadInputsAreNamed) {
  const Arg x = declared(F32, {2});
  const Arg r = declared(F32, {});
  const Arg t = declared(I64, {});
  expect_error<ModelError>(
      [&] {
        infer(adagrad, {r, t, x, x, x, x}, {}, 2);
      },
      {"ai.onnx.preview.training::Adagrad node 'node'", "2 + 3n inputs", "got 6"});
  expect_error<ModelError>(
      [&] {
        infer(adagrad, {r, declared(F32, {}), x, x, x}, {}, 2);
      },
      {"input 1", "update count T", "expected i64"});
  expect_error<ModelError>(
      [&] {
        infer(adagrad, {declared(F32, {2}), t, x, x, x}, {}, 2);
      },
      {"learning rate R", "[2]", "single value"});
  expect_error<ModelError>(
      [&] {
        infer(adam, {r, t, x, x, x, declared(F32, {3})}, {}, 3);
      },
      {"ai.onnx.preview.training::Adam node 'node'", "input 5", "[3]", "must match"});
  expect_error<ModelError>(
      [&] {
        infer(adam, {r, t, x, x, x, declared(F64, {2})}, {}, 3);
      },
      {"input 5", "f64", "must match"});
  expect_error<ModelError>(
      [&] {
        infer(adagrad, {r, t, x, x, x}, {}, 3);
      },
      {"3 outputs", "at most 2"});
  expect_error<ModelError>(
      [&] {
        infer(momentum, {r, t, x, x, x},
              {{"alpha", 0.5}, {"beta", 0.5}, {"mode", std::string("standard")}}, 2);
      },
      {"ai.onnx.preview.training::Momentum node 'node'", "'norm_coefficient' is required"});
  expect_error<ModelError>(
      [&] {
        infer(momentum, {r, t, x, x, x}, momentum_attributes("fast"), 2);
      },
      {"mode is 'fast'", "standard or nesterov"});
}

// BatchNormalization, training_mode=1: X [N=2, C=2, 1] with channel 0 = (1, 3) (mean 2, variance
// 1) and channel 1 = (10, 14) (mean 12, variance 4).
std::vector<Arg> batch_norm_args() {
  return {input(f32({2, 2, 1}, {1, 10, 3, 14})), input(f32({2}, {2, 1})), input(f32({2}, {0, 5})),
          input(f32({2}, {0, 4})), input(f32({2}, {1, 8}))};
}

TEST(BatchNormalizationTraining, NormalizesWithTheBatchStatisticsAndMovesTheRunningOnes) {
  const Attributes attributes{{"training_mode", int64_t{1}}, {"epsilon", 0.0}, {"momentum", 0.5}};
  const auto outs = run("BatchNormalization", batch_norm_args(), attributes, 3);
  // Y = (X - mean) / sqrt(variance) * scale + B.
  expect_tensor(outs.at(0), F32, {2, 2, 1}, {-2, 4, 2, 6});
  // running = input * 0.5 + batch * 0.5.
  expect_tensor(outs.at(1), F32, {2}, {1, 8});
  expect_tensor(outs.at(2), F32, {2}, {1, 6});
}

TEST(BatchNormalizationTraining, TheRunningStatisticsAreOptional) {
  const auto y = run1("BatchNormalization", batch_norm_args(),
                      {{"training_mode", int64_t{1}}, {"epsilon", 0.0}});
  expect_tensor(y, F32, {2, 2, 1}, {-2, 4, 2, 6});
  // The default momentum is 0.9, the running variance keeps input_var's type (f64 here).
  auto args = batch_norm_args();
  args[4] = input(f64({2}, {1, 8}));
  const auto outs = run("BatchNormalization", args, {{"training_mode", int64_t{1}}}, 3);
  expect_tensor(outs.at(2), F64, {2}, {1, 0.9 * 8 + 0.1 * 4}, 1e-12);
}

TEST(BatchNormalizationTraining, BadOutputsAreNamed) {
  const Arg x = declared(F32, {2, 2, 1});
  const Arg c = declared(F32, {2});
  expect_error<ModelError>(
      [&] {
        infer("BatchNormalization", {x, c, c, c, c}, {{"training_mode", int64_t{1}}}, 5);
      },
      {"BatchNormalization node 'node'", "5 outputs", "at most 3"});
  expect_error<ModelError>(
      [&] {
        infer("BatchNormalization", {x, c, c, c, c}, {{"training_mode", int64_t{2}}});
      },
      {"training_mode is 2"});
  // In inference mode the running statistics are not outputs.
  expect_error<UnsupportedOperation>(
      [&] {
        infer("BatchNormalization", {x, c, c, c, c}, {}, 3);
      },
      {"BatchNormalization node 'node'", "training_mode=1"});
}

}  // namespace
}  // namespace troupe::test
