// Shapes computed from a dynamic input's shape (what torch exports for `x.reshape(x.shape[0], ...)`
// with a dynamic batch): shape inference keeps the entries it can follow, and each stream learns
// the rest when it specializes the graph for a request's shapes.

#include <gtest/gtest.h>

#include <gmock/gmock.h>

#include <map>
#include "../test_util.hpp"

#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/model_builder.hpp"
#include "troupe/properties.hpp"

using namespace troupe;
using ::testing::HasSubstr;

namespace {

Tensor ints(std::vector<int64_t> values) {
  const auto n = static_cast<int64_t>(values.size());
  return Tensor::from_vector<int64_t>(Shape{n}, values);
}

// x [?, 6, 4] -> Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [2, 3, 4])) -> [?, 2, 3, 4],
// then Relu, so the reshaped value feeds a kernel.
std::shared_ptr<Model> reshape_by_batch(ModelBuilder& b) {
  auto x = b.input("x", ElementType::f32, {Shape::dynamic, 6, 4});
  auto shape = b.op("Shape", {x}, {}, "shape");
  auto batch =
      b.op("Gather", {shape, b.constant("zero", Tensor::from_vector<int64_t>(Shape{}, {0}))});
  auto batch_1d = b.op("Unsqueeze", {batch, b.constant("axes", ints({0}))});
  auto target =
      b.op("Concat", {batch_1d, b.constant("rest", ints({2, 3, 4}))}, {{"axis", int64_t{0}}});
  auto reshaped = b.op("Reshape", {x, target}, {}, "reshape");
  b.output(b.op("Relu", {reshaped}), "y");
  return b.build();
}

}  // namespace

TEST(ShapeValues, ReshapeKeepsTheStaticEntriesOfAComputedTarget) {
  ModelBuilder b;
  auto model = reshape_by_batch(b);
  EXPECT_EQ(model->value(*model->find_value("y")).shape.to_string(),
            Shape({Shape::dynamic, 2, 3, 4}).to_string());
}

TEST(ShapeValues, ArithmeticAndSlicesOfShapesStayKnown) {
  // [?, 8, 5] -> target [batch, 8 * 5 / 2, 2] built with Slice, Mul, Div and Concat.
  ModelBuilder b;
  auto x = b.input("x", ElementType::f32, {Shape::dynamic, 8, 5});
  auto shape = b.op("Shape", {x});
  auto head = b.op("Slice", {shape, b.constant("s0", ints({0})), b.constant("e1", ints({1}))});
  auto tail = b.op("Slice", {shape, b.constant("s1", ints({1})), b.constant("e3", ints({3}))});
  auto c = b.op("Gather", {tail, b.constant("i0", Tensor::from_vector<int64_t>(Shape{}, {0}))});
  auto w = b.op("Gather", {tail, b.constant("i1", Tensor::from_vector<int64_t>(Shape{}, {1}))});
  auto half = b.op(
      "Div", {b.op("Mul", {c, w}), b.constant("two", Tensor::from_vector<int64_t>(Shape{}, {2}))});
  auto half_1d = b.op("Unsqueeze", {half, b.constant("axes", ints({0}))});
  auto target =
      b.op("Concat", {head, half_1d, b.constant("pair", ints({2}))}, {{"axis", int64_t{0}}});
  b.output(b.op("Reshape", {x, target}), "y");
  auto model = b.build();
  EXPECT_EQ(model->value(*model->find_value("y")).shape.to_string(),
            Shape({Shape::dynamic, 20, 2}).to_string());
}

TEST(ShapeValues, AStreamSpecializesTheComputedShapePerBatch) {
  ModelBuilder b;
  auto model = reshape_by_batch(b);
  Core core;
  CompiledModel compiled = core.compile_model(model, "CPU");
  InferRequest request = compiled.create_infer_request();
  for (int64_t batch : {1, 3, 2}) {
    Tensor x = test::random_tensor(Shape{batch, 6, 4}, static_cast<unsigned>(batch));
    request.set_tensor("x", x);
    request.infer();
    Tensor y = request.get_tensor("y");
    EXPECT_EQ(y.shape(), (Shape{batch, 2, 3, 4}));
    const auto in = x.to_vector<float>();
    const auto out = y.to_vector<float>();
    ASSERT_EQ(out.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], std::max(in[i], 0.0f)) << i;
  }
}

TEST(ShapeValues, CountersNameWhatTheSpecializationRuns) {
  ModelBuilder b;
  auto model = reshape_by_batch(b);
  Core core;
  CompiledModel compiled = core.compile_model(model, "CPU", {{props::enable_profiling, true}});
  InferRequest request = compiled.create_infer_request();
  request.set_tensor("x", test::random_tensor(Shape{3, 6, 4}, 1));
  request.infer();
  std::map<std::string, ProfilingInfo> by_name;
  for (const ProfilingInfo& p : request.profiling_info()) by_name[p.name] = p;
  ASSERT_TRUE(by_name.count("shape") && by_name.count("reshape"));
  // The shape computation became a constant when the stream specialized for [3, 6, 4]...
  EXPECT_EQ(by_name["shape"].exec_type, "folded");
  EXPECT_EQ(by_name["shape"].status, ProfilingInfo::Status::optimized_out);
  // ...and the Reshape that ran names its kernel, not "dynamic".
  EXPECT_EQ(by_name["reshape"].status, ProfilingInfo::Status::executed);
  EXPECT_NE(by_name["reshape"].exec_type, "dynamic");
  EXPECT_NE(by_name["reshape"].exec_type, "folded");
}

TEST(ShapeValues, ATargetOfUnknownLengthIsRefusedByName) {
  ModelBuilder b;
  auto x = b.input("x", ElementType::f32, {2, 3});
  auto target = b.input("target", ElementType::i64, {Shape::dynamic});
  b.output(b.op("Reshape", {x, target}, {}, "reshape"), "y");
  EXPECT_THAT(test::error_of<Error>([&] { b.build(); }), HasSubstr("Reshape node 'reshape'"));
}
