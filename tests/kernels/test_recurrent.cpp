// RNN, GRU and LSTM: shape inference, reference values computed by hand, and the errors that name
// what was wrong. The ONNX node tests check more values; BackendConsistency.Recurrent checks the
// sgemm kernel against this reference.

#include <gtest/gtest.h>

#include <cmath>

#include "tests/kernels/reference_op_runner.hpp"

namespace troupe::test {
namespace {

Attributes hidden(int64_t size, const std::string& direction = "forward") {
  return {{"hidden_size", size}, {"direction", direction}};
}

TEST(Recurrent, OutputShapesFollowDirectionAndLayout) {
  // X [seq 5, batch 3, input 4], bidirectional LSTM with hidden 2.
  auto outs =
      infer("LSTM", {declared(F32, {5, 3, 4}), declared(F32, {2, 8, 4}), declared(F32, {2, 8, 2})},
            hidden(2, "bidirectional"), 3);
  EXPECT_EQ(outs[0].shape, (Shape{5, 2, 3, 2}));
  EXPECT_EQ(outs[1].shape, (Shape{2, 3, 2}));
  EXPECT_EQ(outs[2].shape, (Shape{2, 3, 2}));
  // layout 1: X [batch 3, seq 5, input 4]; a GRU has 3 gates.
  Attributes batch_major = hidden(2);
  batch_major.set("layout", int64_t{1});
  outs =
      infer("GRU", {declared(F32, {3, 5, 4}), declared(F32, {1, 6, 4}), declared(F32, {1, 6, 2})},
            batch_major, 2);
  EXPECT_EQ(outs[0].shape, (Shape{3, 5, 1, 2}));
  EXPECT_EQ(outs[1].shape, (Shape{3, 1, 2}));
}

TEST(Recurrent, ShortSequencesStopAndKeepTheirLastState) {
  // RNN, hidden 1: h_t = tanh(x_t + 0.5 h_{t-1}). Two rows of lengths 2 and 1.
  const Tensor x = f32({2, 2, 1}, {1.0f, -1.0f, 0.5f, 2.0f});  // [t][b]
  const Tensor lengths = Tensor::from_vector<int32_t>(Shape{2}, {2, 1});
  auto out = run("RNN",
                 {input(x), constant(f32({1, 1, 1}, {1.0f})), constant(f32({1, 1, 1}, {0.5f})),
                  omitted(), input(lengths)},
                 hidden(1), 2);
  const double h00 = std::tanh(1.0), h01 = std::tanh(-1.0);
  const double h10 = std::tanh(0.5 + 0.5 * h00);
  // Y [seq, dirs, batch, hidden]: row 1 ended after step 0, so its step 1 is 0.
  expect_tensor(out[0], F32, Shape{2, 1, 2, 1}, {h00, h01, h10, 0.0}, 1e-6);
  expect_tensor(out[1], F32, Shape{1, 2, 1}, {h10, h01}, 1e-6);
}

TEST(Recurrent, ReverseRowsRunFromTheirOwnLastStep) {
  // Reverse RNN with W = 1, R = 0: h_t = tanh(x_t); row 1 has length 1, so its state is x at t=0.
  const Tensor x = f32({2, 2, 1}, {1.0f, -1.0f, 0.5f, 2.0f});
  const Tensor lengths = Tensor::from_vector<int32_t>(Shape{2}, {2, 1});
  auto out = run("RNN",
                 {input(x), constant(f32({1, 1, 1}, {1.0f})), constant(f32({1, 1, 1}, {0.0f})),
                  omitted(), input(lengths)},
                 hidden(1, "reverse"), 2);
  expect_tensor(out[1], F32, Shape{1, 2, 1}, {std::tanh(1.0), std::tanh(-1.0)}, 1e-6);
}

TEST(Recurrent, ErrorsNameTheInputOrAttribute) {
  const Arg x = declared(F32, {5, 3, 4});
  expect_error<ModelError>(
      [&] {
        infer("LSTM", {x, declared(F32, {1, 8, 3}), declared(F32, {1, 8, 2})}, hidden(2), 3);
      },
      {"LSTM", "input W", "[1,8,4]"});
  expect_error<ModelError>(
      [&] {
        infer("GRU", {x, declared(F32, {1, 6, 4}), declared(F32, {1, 6, 2})}, hidden(2, "sideways"),
              2);
      },
      {"direction", "sideways"});
  expect_error<ModelError>(
      [&] {
        infer("RNN",
              {x, declared(F32, {1, 2, 4}), declared(F32, {1, 2, 2}), omitted(),
               declared(ElementType::f32, {3})},
              hidden(2), 2);
      },
      {"sequence_lens", "element type"});
  Attributes unknown = hidden(1);
  unknown.set("activations", std::vector<std::string>{"Swish"});
  expect_error<Error>(
      [&] {
        run("RNN",
            {input(f32({1, 1, 1}, {1.0f})), constant(f32({1, 1, 1}, {1.0f})),
             constant(f32({1, 1, 1}, {0.0f}))},
            unknown, 2);
      },
      {"RNN", "Swish"});
  expect_error<Error>(
      [&] {
        run("RNN",
            {input(f32({1, 1, 1}, {1.0f})), constant(f32({1, 1, 1}, {1.0f})),
             constant(f32({1, 1, 1}, {0.0f})), omitted(),
             input(Tensor::from_vector<int32_t>(Shape{1}, {5}))},
            hidden(1), 2);
      },
      {"sequence_lens", "5"});
}

}  // namespace
}  // namespace troupe::test
