// Hostile model files (issue 19, item 3): a model may not make troupe allocate absurd memory,
// count past int64 or recurse without bound. Each malicious model is built in code and must be
// refused with a typed error naming the field, node or value, before any large allocation: the
// sizes here (10^11 to 10^15 bytes) would fail as std::bad_alloc, or wrap to a small size, if an
// allocation were attempted. External data outside the model's directory is refused by
// test_onnx_reader.cpp (ExternalDataMustStayInTheModelDirectory, ExternalDataThatIsTooShort...).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "engine/graph/compiled_graph.hpp"
#include "serialization/npy_format.hpp"
#include "serialization/onnx_reader.hpp"
#include "serialization/troupe_format.hpp"
#include "tests/serialization/onnx_test_models.hpp"
#include "tests/serialization/serialization_test_util.hpp"
#include "tests/test_util.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"

namespace troupe::testing {
namespace {

using serialization::read_onnx_model_from_buffer;
using test::error_of;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int64_t tera = 1000LL * 1000 * 1000 * 1000;

std::shared_ptr<Model> read(const onnx::ModelProto& m) {
  const std::string bytes = serialize(m);
  return read_onnx_model_from_buffer(bytes.data(), bytes.size());
}

// The message of the ModelError `compile` throws for `m` (which reads fine).
std::string compile_error(const onnx::ModelProto& m) {
  std::shared_ptr<Model> model = read(m);
  Core core;
  return error_of<ModelError>([&] { core.compile_model(model, "CPU"); });
}

onnx::TensorProto int64_tensor(const std::string& name, const std::vector<int64_t>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t.add_int64_data(v);
  return t;
}

// y = ConstantOfShape(shape) (or `op` of x and shape), shape an int64 initializer.
onnx::ModelProto shape_op_model(const std::string& op, const std::vector<int64_t>& shape) {
  auto m = onnx_model();
  *m.mutable_graph()->add_initializer() = int64_tensor("shape", shape);
  if (op == "ConstantOfShape") {
    onnx_node(m, op, {"shape"}, {"y"}, "grow");
  } else {
    onnx_input(m, "x", onnx::TensorProto::FLOAT, {1, 1});
    onnx_node(m, op, {"x", "shape"}, {"y"}, "grow");
  }
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {"a", "b"});
  return m;
}

// ---- declared tensors: the bytes must be in the file -------------------------------------------

TEST(HostileModels, InitializerOf10To11ElementsWithoutItsDataIsRefused) {
  auto m = onnx_add_relu_model();
  onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_raw_data();
  w->clear_dims();
  w->add_dims(100 * 1000 * 1000 * 1000LL);
  EXPECT_THAT(error_of<ModelError>([&] { read(m); }),
              AllOf(HasSubstr("initializer 'w'"), HasSubstr("float_data")));
}

TEST(HostileModels, InitializerWithRawDataShortOfItsShapeIsRefused) {
  auto m = onnx_add_relu_model();
  onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_dims();
  w->add_dims(100 * 1000 * 1000 * 1000LL);
  EXPECT_THAT(error_of<ModelError>([&] { read(m); }),
              AllOf(HasSubstr("initializer 'w'"), HasSubstr("bytes of raw data")));
}

TEST(HostileModels, InitializerWhoseShapeProductOverflowsInt64IsRefused) {
  auto m = onnx_add_relu_model();
  onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_dims();
  for (int i = 0; i < 3; ++i) w->add_dims(int64_t{1} << 32);  // 2^96 elements
  EXPECT_THAT(error_of<ModelError>([&] { read(m); }),
              AllOf(HasSubstr("initializer 'w'"), HasSubstr("too large")));
}

// ---- shapes that count past int64 ---------------------------------------------------------------

TEST(HostileModels, EmptyInitializerWhoseOtherDimensionsOverflowIsRefused) {
  // Zero elements, but strides of 2^80 bytes: found by fuzzing the .npy reader (below).
  auto m = onnx_add_relu_model();
  onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_raw_data();
  w->clear_dims();
  for (int64_t d : {int64_t{0}, int64_t{1} << 40, int64_t{1} << 40}) w->add_dims(d);
  EXPECT_THAT(error_of<ModelError>([&] { read(m); }),
              AllOf(HasSubstr("initializer 'w'"), HasSubstr("too large")));
}

TEST(HostileModels, EmptyNpyArrayWhoseOtherDimensionsOverflowIsRefused) {
  // tests/fuzz/corpus/npy/crash-zero_dimension_strides_overflow.npy: UBSan reported the strides'
  // signed overflow in Tensor's constructor.
  const std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 922, 0, 7203685, 20, "
      "720368547707), }";
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() + 1);
  bytes += '\0';
  bytes += header + "\n";
  EXPECT_THAT(error_of<FormatError>([&] {
                serialization::parse_npy(reinterpret_cast<const unsigned char*>(bytes.data()),
                                         bytes.size(), "hostile.npy");
              }),
              AllOf(HasSubstr("hostile.npy"), HasSubstr("shape"), HasSubstr("too large")));
}

TEST(HostileModels, StridesRefuseToWrap) {
  EXPECT_THROW(row_major_strides(Shape({0, int64_t{1} << 40, int64_t{1} << 40})), InvalidArgument);
}

TEST(HostileModels, GraphInputWhoseShapeOverflowsInt64IsRefused) {
  auto m = onnx_model();
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {int64_t{1} << 40, int64_t{1} << 40});
  onnx_node(m, "Relu", {"x"}, {"y"}, "relu");
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {"a", "b"});
  EXPECT_THAT(error_of<ModelError>([&] { read(m); }),
              AllOf(HasSubstr("input 'x'"), HasSubstr("[1099511627776,1099511627776]"),
                    HasSubstr("more bytes than int64")));
}

TEST(HostileModels, NodeOutputWhoseShapeOverflowsInt64IsRefused) {
  // Before: the product wrapped to 0, the model compiled and ran, and wrote an "output" of shape
  // [2^40, 2^40] without data.
  EXPECT_THAT(
      error_of<ModelError>([&] {
        read(shape_op_model("ConstantOfShape", {int64_t{1} << 40, int64_t{1} << 40}));
      }),
      AllOf(HasSubstr("node 'grow'"), HasSubstr("output 'y'"), HasSubstr("more bytes than int64")));
}

TEST(HostileModels, ReshapeTargetWhoseCountOverflowsIsRefused) {
  // tests/fuzz/corpus/onnx_buffer/crash-reshape_target_count_overflow.onnx (UBSan: the count of
  // the target shape overflowed; the error then claimed a wrapped count).
  EXPECT_THAT(error_of<ModelError>([&] {
                read(shape_op_model("Reshape", {int64_t{1} << 32, int64_t{1} << 32}));
              }),
              AllOf(HasSubstr("node 'grow'"), HasSubstr("more elements than int64 can count")));
}

TEST(HostileModels, ShapeElementCountRefusesToWrap) {
  EXPECT_THROW(Shape({int64_t{1} << 31, int64_t{1} << 31, int64_t{1} << 31}).element_count(),
               InvalidArgument);
}

// ---- tensors no machine has the memory for: refused when compiled, not allocated ---------------

TEST(HostileModels, ConstantOfShapeOfPetabytesIsRefusedAtCompile) {
  const std::string message = compile_error(shape_op_model("ConstantOfShape", {tera, 1000}));
  EXPECT_THAT(message, AllOf(HasSubstr("value 'y'"), HasSubstr("ConstantOfShape node 'grow'"),
                             HasSubstr("more than this machine's")));
}

TEST(HostileModels, ExpandToPetabytesIsRefusedAtCompile) {
  EXPECT_THAT(compile_error(shape_op_model("Expand", {tera, 1000})),
              AllOf(HasSubstr("Expand node 'grow'"), HasSubstr("more than this machine's")));
}

TEST(HostileModels, TileToPetabytesIsRefusedAtCompile) {
  EXPECT_THAT(compile_error(shape_op_model("Tile", {tera, 1000})),
              AllOf(HasSubstr("Tile node 'grow'"), HasSubstr("more than this machine's")));
}

TEST(HostileModels, RangeOf10To13ElementsIsRefusedAtCompile) {
  auto m = onnx_model();
  *m.mutable_graph()->add_initializer() = int64_tensor("start", {0});
  *m.mutable_graph()->add_initializer() = int64_tensor("limit", {10 * tera});
  *m.mutable_graph()->add_initializer() = int64_tensor("delta", {1});
  for (int i = 0; i < 3; ++i) m.mutable_graph()->mutable_initializer(i)->clear_dims();  // scalars
  onnx_node(m, "Range", {"start", "limit", "delta"}, {"y"}, "grow");
  onnx_output(m, "y", onnx::TensorProto::INT64, {"n"});
  EXPECT_THAT(compile_error(m), AllOf(HasSubstr("Range node 'grow'"), HasSubstr("bytes")));
}

TEST(HostileModels, GraphInputOfPetabytesIsRefusedAtCompile) {
  auto m = onnx_model();
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {1000 * tera});
  onnx_node(m, "Relu", {"x"}, {"y"}, "relu");
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {1000 * tera});
  EXPECT_THAT(compile_error(m),
              AllOf(HasSubstr("value 'x'"), HasSubstr("more than this machine's")));
}

TEST(HostileModels, LegitimatelyLargeValuesStillCompile) {
  // 256 MiB intermediate from a tiny file: large, but a real model's size; not refused.
  Core core;
  EXPECT_NO_THROW(core.compile_model(read(shape_op_model("ConstantOfShape", {8192, 8192})), "CPU"));
}

TEST(HostileModels, TroupeFileDeclaringAPetabyteInputIsRefusedAtCompile) {
  test::TempDir dir("hostile");
  Model model("huge");
  ValueId x = model.add_input("x", ElementType::f32, Shape({1000 * tera}));
  model.set_outputs({x});
  const std::string path = (dir.path() / "huge.troupe").string();
  serialization::save_model(model, path);
  Core core;
  EXPECT_THAT(error_of<ModelError>(
                  [&] { core.compile_model(serialization::read_troupe_model(path), "CPU"); }),
              AllOf(HasSubstr("value 'x'"), HasSubstr("more than this machine's")));
}

// ---- huge repeated fields and nesting -----------------------------------------------------------

TEST(HostileModels, RankBeyondTheLimitIsRefusedNamingTheField) {
  auto m = onnx_model();
  onnx_input(m, "x", onnx::TensorProto::FLOAT,
             std::vector<OnnxDim>(serialization::onnx_max_rank + 1, OnnxDim(1)));
  onnx_node(m, "Relu", {"x"}, {"y"}, "relu");
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {1});
  EXPECT_THAT(error_of<ModelError>([&] { read(m); }),
              AllOf(HasSubstr("graph input 'x'"), HasSubstr("rank 65")));

  auto w = onnx_add_relu_model();
  for (int i = 0; i < 100000; ++i) w.mutable_graph()->mutable_initializer(0)->add_dims(1);
  EXPECT_THAT(error_of<ModelError>([&] { read(w); }),
              AllOf(HasSubstr("initializer 'w'"), HasSubstr("rank 100002")));
}

TEST(HostileModels, DeeplyNestedSubgraphsAreRefusedWithoutRecursingOnTheStack) {
  // If nodes nested 10000 deep in their then_branch attributes: protobuf's recursion limit
  // refuses the bytes before troupe or libonnx walk them.
  onnx::GraphProto inner;
  inner.set_name("leaf");
  for (int depth = 0; depth < 10000; ++depth) {
    onnx::GraphProto outer;
    outer.set_name("g" + std::to_string(depth));
    onnx::NodeProto* node = outer.add_node();
    node->set_op_type("If");
    onnx::AttributeProto* a = node->add_attribute();
    a->set_name("then_branch");
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = std::move(inner);
    inner = std::move(outer);
  }
  auto m = onnx_model();
  *m.mutable_graph() = std::move(inner);
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));
  EXPECT_THAT(
      error_of<FormatError>([&] { read_onnx_model_from_buffer(bytes.data(), bytes.size()); }),
      HasSubstr("<memory buffer>"));
}

}  // namespace
}  // namespace troupe::testing
