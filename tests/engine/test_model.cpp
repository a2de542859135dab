#include <gtest/gtest.h>

#include <gmock/gmock.h>
#include "../test_util.hpp"

#include "troupe/error.hpp"
#include "troupe/model_builder.hpp"

using namespace troupe;
using ::testing::HasSubstr;
using troupe::test::error_of;

TEST(Model, BuilderInfersShapesAndKeepsNames) {
  ModelBuilder b("m");
  auto x = b.input("x", ElementType::f32, {2, 3});
  auto w = b.constant("w", Tensor(ElementType::f32, {3, 4}));
  auto y = b.op("MatMul", {x, w}, {}, "mm");
  auto z = b.op("Relu", {y}, {}, "act");
  b.output(z, "out");
  auto model = b.build();
  EXPECT_EQ(model->name(), "m");
  EXPECT_EQ(model->value(z).name, "out");
  EXPECT_EQ(model->value(z).shape, (Shape{2, 4}));
  EXPECT_EQ(model->value(z).type, ElementType::f32);
  EXPECT_TRUE(model->is_constant(w));
  EXPECT_EQ(model->find_value("out"), z);
  EXPECT_EQ(model->find_node("act"), 1u);
}

TEST(Model, ValidateSortsNodesTopologically) {
  Model m("unsorted");
  auto x = m.add_input("x", ElementType::f32, {4});
  auto a = m.add_value({"a", {}, {}});
  auto b = m.add_value({"b", {}, {}});
  m.add_node(Node{"second", "Relu", {a}, {b}, {}});
  m.add_node(Node{"first", "Relu", {x}, {a}, {}});
  m.add_output(b);
  m.validate();
  EXPECT_EQ(m.nodes()[0].name, "first");
  EXPECT_EQ(m.nodes()[1].name, "second");
  EXPECT_EQ(m.value(b).shape, (Shape{4}));
}

TEST(Model, ErrorsNameTheNode) {
  {
    ModelBuilder b;
    auto x = b.input("x", ElementType::f32, {2, 3});
    auto w = b.constant("w", Tensor(ElementType::f32, {5, 4}));
    b.output(b.op("MatMul", {x, w}, {}, "bad_matmul"));
    EXPECT_THAT(error_of<ModelError>([&] { b.build(); }), HasSubstr("bad_matmul"));
  }
  {
    ModelBuilder b;
    auto x = b.input("x", ElementType::f32, {2});
    b.output(b.op("NoSuchOp", {x}, {}, "mystery"));
    const std::string msg = error_of<UnsupportedOperation>([&] { b.build(); });
    EXPECT_THAT(msg, HasSubstr("mystery"));
    EXPECT_THAT(msg, HasSubstr("NoSuchOp"));
  }
  {
    ModelBuilder b;
    auto x = b.input("x", ElementType::f32, {2});
    b.output(b.op("Relu", {x, x}, {}, "two_inputs"));
    EXPECT_THAT(error_of<ModelError>([&] { b.build(); }), HasSubstr("two_inputs"));
  }
}

TEST(Model, CycleAndDanglingInputsAreRejected) {
  Model m("cycle");
  auto a = m.add_value({"a", {}, {}});
  auto b = m.add_value({"b", {}, {}});
  m.add_input("x", ElementType::f32, {1});
  m.add_node(Node{"n1", "Relu", {b}, {a}, {}});
  m.add_node(Node{"n2", "Relu", {a}, {b}, {}});
  m.add_output(b);
  EXPECT_THAT(error_of<ModelError>([&] { m.validate(); }), HasSubstr("cycle"));

  Model d("dangling");
  auto in = d.add_value({"never_set", {}, {}});
  auto out = d.add_value({"out", {}, {}});
  d.add_node(Node{"user", "Relu", {in}, {out}, {}});
  d.add_output(out);
  const std::string msg = error_of<ModelError>([&] { d.validate(); });
  EXPECT_THAT(msg, HasSubstr("user"));
  EXPECT_THAT(msg, HasSubstr("never_set"));
}

TEST(Model, DuplicateNamesAndMissingOutputs) {
  Model m("dup");
  m.add_input("x", ElementType::f32, {1});
  EXPECT_THROW(m.add_input("x", ElementType::f32, {1}), ModelError);
  EXPECT_THROW(m.validate(), ModelError);  // no outputs
  EXPECT_THROW(m.add_output(99), ModelError);
  EXPECT_THROW(m.add_input("u", ElementType::undefined, {1}), ModelError);
}

TEST(Attributes, TypedAccessorsAndErrors) {
  Attributes a{{"axis", int64_t{1}},
               {"alpha", 0.5},
               {"mode", std::string("linear")},
               {"pads", std::vector<int64_t>{1, 1, 0, 0}}};
  EXPECT_EQ(a.get_int("axis"), 1);
  EXPECT_EQ(a.get_float("alpha"), 0.5);
  EXPECT_EQ(a.get_float("axis"), 1.0);  // ints read as floats
  EXPECT_EQ(a.get_string("mode"), "linear");
  EXPECT_EQ(a.get_ints("pads").size(), 4u);
  EXPECT_EQ(a.get_int_or("group", 1), 1);
  EXPECT_THAT(error_of<ModelError>([&] { a.get_int("mode"); }), HasSubstr("'mode'"));
  EXPECT_THAT(error_of<ModelError>([&] { a.get_int("missing"); }), HasSubstr("'missing'"));
}
