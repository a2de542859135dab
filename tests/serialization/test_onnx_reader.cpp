#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "serialization/onnx_reader.hpp"
#include "tests/serialization/onnx_test_models.hpp"
#include "tests/test_util.hpp"
#include "troupe/error.hpp"

namespace troupe {
namespace {

using troupe::test::error_of;
namespace fs = std::filesystem;
using namespace troupe::serialization;
using namespace troupe::testing;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::shared_ptr<Model> read(const onnx::ModelProto& m, const std::string& base_dir = "") {
  std::string bytes = serialize(m);
  return read_onnx_model_from_buffer(bytes.data(), bytes.size(), base_dir);
}

const Node& node_named(const Model& model, const std::string& name) {
  auto index = model.find_node(name);
  EXPECT_TRUE(index.has_value()) << "no node " << name;
  return model.nodes().at(*index);
}

TEST(OnnxReader, InitializerBecomesConstantAndNodesKeepOrderAndNames) {
  auto model = read(onnx_add_relu_model());
  EXPECT_EQ(model->name(), "test_graph");
  ASSERT_EQ(model->inputs().size(), 1u);
  const ValueInfo& x = model->value(model->inputs()[0]);
  EXPECT_EQ(x.name, "x");
  EXPECT_EQ(x.type, ElementType::f32);
  EXPECT_EQ(x.shape, (Shape{2, 3}));

  auto w = model->find_value("w");
  ASSERT_TRUE(w.has_value());
  ASSERT_TRUE(model->is_constant(*w));
  EXPECT_EQ(model->constants().at(*w).to_vector<float>(),
            (std::vector<float>{1, -2, 3, -4, 5, -6}));

  ASSERT_EQ(model->nodes().size(), 2u);
  EXPECT_EQ(model->nodes()[0].op_type, "Add");
  EXPECT_EQ(model->nodes()[0].name, "add");
  EXPECT_EQ(model->nodes()[1].op_type, "Relu");
  EXPECT_EQ(model->nodes()[0].attributes.get_int(onnx_opset_attribute), 13);

  ASSERT_EQ(model->outputs().size(), 1u);
  const ValueInfo& y = model->value(model->outputs()[0]);
  EXPECT_EQ(y.name, "y");
  EXPECT_EQ(y.type, ElementType::f32);
  EXPECT_EQ(y.shape, (Shape{2, 3}));
}

TEST(OnnxReader, RecordsTheDefaultDomainOpsetOnEveryNode) {
  auto m = onnx_add_relu_model();
  m.mutable_opset_import(0)->set_version(11);
  m.mutable_opset_import(0)->set_domain("ai.onnx");
  auto model = read(m);
  for (const Node& n : model->nodes()) EXPECT_EQ(n.attributes.get_int("opset"), 11) << n.name;
}

TEST(OnnxReader, InitializerListedAsGraphInputIsAConstant) {
  auto m = onnx_add_relu_model();
  onnx_input(m, "w", onnx::TensorProto::FLOAT, {2, 3});  // IR < 4 style: overridable default
  auto model = read(m);
  ASSERT_EQ(model->inputs().size(), 1u);
  EXPECT_TRUE(model->is_constant(*model->find_value("w")));
}

TEST(OnnxReader, TypedTensorFieldsOfEveryElementType) {
  auto m = onnx_model();
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {2});
  onnx_node(m, "Relu", {"x"}, {"y"});
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {2});
  auto add = [&](const std::string& name, int32_t type) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    t->add_dims(2);
    return t;
  };
  auto* f32 = add("f32", onnx::TensorProto::FLOAT);
  f32->add_float_data(1.5f);
  f32->add_float_data(-2.25f);
  auto* f64 = add("f64", onnx::TensorProto::DOUBLE);
  f64->add_double_data(0.125);
  f64->add_double_data(-1e300);
  auto* i64 = add("i64", onnx::TensorProto::INT64);
  i64->add_int64_data(int64_t{1} << 40);
  i64->add_int64_data(-7);
  auto* i32 = add("i32", onnx::TensorProto::INT32);
  i32->add_int32_data(-100000);
  i32->add_int32_data(42);
  auto* i8 = add("i8", onnx::TensorProto::INT8);
  i8->add_int32_data(-128);
  i8->add_int32_data(127);
  auto* u8 = add("u8", onnx::TensorProto::UINT8);
  u8->add_int32_data(0);
  u8->add_int32_data(255);
  auto* b = add("b", onnx::TensorProto::BOOL);
  b->add_int32_data(1);
  b->add_int32_data(0);
  auto* f16 = add("f16", onnx::TensorProto::FLOAT16);
  f16->add_int32_data(0x3C00);  // 1.0
  f16->add_int32_data(0xC000);  // -2.0
  auto* bf16 = add("bf16", onnx::TensorProto::BFLOAT16);
  bf16->add_int32_data(0x3FC0);  // 1.5
  bf16->add_int32_data(0x4120);  // 10.0
  // onnx.proto: INT16 and UINT16 live in int32_data, UINT32 and UINT64 in uint64_data.
  auto* i16 = add("i16", onnx::TensorProto::INT16);
  i16->add_int32_data(-32768);
  i16->add_int32_data(32767);
  auto* u16 = add("u16", onnx::TensorProto::UINT16);
  u16->add_int32_data(0);
  u16->add_int32_data(65535);
  auto* u32 = add("u32", onnx::TensorProto::UINT32);
  u32->add_uint64_data(4294967295u);
  u32->add_uint64_data(1);
  auto* u64 = add("u64", onnx::TensorProto::UINT64);
  u64->add_uint64_data(18446744073709551615ull);
  u64->add_uint64_data(uint64_t{1} << 63);

  auto model = read(m);
  auto constant = [&](const std::string& name) {
    return model->constants().at(*model->find_value(name));
  };
  EXPECT_EQ(constant("f32").to_vector<float>(), (std::vector<float>{1.5f, -2.25f}));
  EXPECT_EQ(constant("f64").to_vector<double>(), (std::vector<double>{0.125, -1e300}));
  EXPECT_EQ(constant("i64").to_vector<int64_t>(), (std::vector<int64_t>{int64_t{1} << 40, -7}));
  EXPECT_EQ(constant("i32").to_vector<int32_t>(), (std::vector<int32_t>{-100000, 42}));
  EXPECT_EQ(constant("i8").to_vector<int8_t>(), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(constant("u8").to_vector<uint8_t>(), (std::vector<uint8_t>{0, 255}));
  EXPECT_EQ(constant("b").to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ(constant("f16").element_type(), ElementType::f16);
  EXPECT_EQ(constant("f16").value_at(0), 1.0);
  EXPECT_EQ(constant("f16").value_at(1), -2.0);
  EXPECT_EQ(constant("bf16").element_type(), ElementType::bf16);
  EXPECT_EQ(constant("bf16").value_at(0), 1.5);
  EXPECT_EQ(constant("bf16").value_at(1), 10.0);
  EXPECT_EQ(constant("i16").element_type(), ElementType::i16);
  EXPECT_EQ(constant("i16").to_vector<int16_t>(), (std::vector<int16_t>{-32768, 32767}));
  EXPECT_EQ(constant("u16").element_type(), ElementType::u16);
  EXPECT_EQ(constant("u16").to_vector<uint16_t>(), (std::vector<uint16_t>{0, 65535}));
  EXPECT_EQ(constant("u32").element_type(), ElementType::u32);
  EXPECT_EQ(constant("u32").to_vector<uint32_t>(), (std::vector<uint32_t>{4294967295u, 1}));
  EXPECT_EQ(constant("u64").element_type(), ElementType::u64);
  EXPECT_EQ(constant("u64").to_vector<uint64_t>(),
            (std::vector<uint64_t>{18446744073709551615ull, uint64_t{1} << 63}));
}

TEST(OnnxReader, RawDataAndGraphValuesOfTheNewIntegerTypes) {
  // A UINT16 graph input (refused before these types existed) through BitShift, with a u16
  // initializer in raw_data (little-endian), and the u64 initializer's count checked against
  // uint64_data.
  auto m = onnx_model();
  onnx_input(m, "x", onnx::TensorProto::UINT16, {2});
  onnx_string_attribute(onnx_node(m, "BitShift", {"x", "n"}, {"y"}), "direction", "LEFT");
  onnx_output(m, "y", onnx::TensorProto::UINT16, {2});
  auto* n = m.mutable_graph()->add_initializer();
  n->set_name("n");
  n->set_data_type(onnx::TensorProto::UINT16);
  n->add_dims(2);
  const uint16_t shifts[2] = {1, 0x0f01};
  n->set_raw_data(std::string(reinterpret_cast<const char*>(shifts), sizeof shifts));
  auto model = read(m);
  EXPECT_EQ(model->value(*model->find_value("x")).type, ElementType::u16);
  EXPECT_EQ(model->value(*model->find_value("y")).type, ElementType::u16);
  EXPECT_EQ(model->constants().at(*model->find_value("n")).to_vector<uint16_t>(),
            (std::vector<uint16_t>{1, 0x0f01}));

  auto short_field = onnx_model();
  onnx_input(short_field, "x", onnx::TensorProto::FLOAT, {2});
  onnx_node(short_field, "Relu", {"x"}, {"y"});
  onnx_output(short_field, "y", onnx::TensorProto::FLOAT, {2});
  auto* u = short_field.mutable_graph()->add_initializer();
  u->set_name("u");
  u->set_data_type(onnx::TensorProto::UINT64);
  u->add_dims(2);
  u->add_uint64_data(1);
  EXPECT_THAT(error_of<ModelError>([&] { read(short_field); }),
              AllOf(HasSubstr("uint64_data"), HasSubstr("1 values")));
}

TEST(OnnxReader, RawDataOfOtherTypesAndScalars) {
  auto m = onnx_model();
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {2});
  onnx_node(m, "Relu", {"x"}, {"y"});
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {2});
  auto* i64 = m.mutable_graph()->add_initializer();
  i64->set_name("scalar");
  i64->set_data_type(onnx::TensorProto::INT64);
  int64_t v = -3;
  i64->set_raw_data(std::string(reinterpret_cast<const char*>(&v), sizeof v));
  auto* b = m.mutable_graph()->add_initializer();
  b->set_name("bools");
  b->set_data_type(onnx::TensorProto::BOOL);
  b->add_dims(3);
  b->set_raw_data(std::string("\x00\x01\x07", 3));  // a non-zero byte other than 1 is true
  auto* empty = m.mutable_graph()->add_initializer();
  empty->set_name("empty");
  empty->set_data_type(onnx::TensorProto::FLOAT);
  empty->add_dims(0);
  empty->add_dims(4);

  auto model = read(m);
  const Tensor& s = model->constants().at(*model->find_value("scalar"));
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.to_vector<int64_t>(), std::vector<int64_t>{-3});
  const Tensor& bools = model->constants().at(*model->find_value("bools"));
  const auto* raw = static_cast<const uint8_t*>(bools.raw_data());
  EXPECT_EQ(raw[0], 0);
  EXPECT_EQ(raw[1], 1);
  EXPECT_EQ(raw[2], 1);
  EXPECT_EQ(model->constants().at(*model->find_value("empty")).shape(), (Shape{0, 4}));
}

TEST(OnnxReader, ConstantNodesBecomeConstants) {
  auto m = onnx_model();
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {2, 3});
  auto* c = onnx_node(m, "Constant", {}, {"bias"}, "make_bias");
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = onnx_raw_f32("", {3}, {0.5f, 1.5f, 2.5f});
  auto* s = onnx_node(m, "Constant", {}, {"scale"}, "make_scale");
  onnx_float_attribute(s, "value_float", 2.0f);
  auto* shape = onnx_node(m, "Constant", {}, {"shape"}, "make_shape");
  onnx_ints_attribute(shape, "value_ints", {3, 2});
  onnx_node(m, "Add", {"x", "bias"}, {"biased"});
  onnx_node(m, "Mul", {"biased", "scale"}, {"scaled"});
  onnx_node(m, "Reshape", {"scaled", "shape"}, {"y"});
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {3, 2});

  auto model = read(m);
  ASSERT_EQ(model->nodes().size(), 3u);  // no Constant nodes left
  for (const Node& n : model->nodes()) EXPECT_NE(n.op_type, "Constant");
  EXPECT_EQ(model->constants().at(*model->find_value("bias")).to_vector<float>(),
            (std::vector<float>{0.5f, 1.5f, 2.5f}));
  const Tensor& scale = model->constants().at(*model->find_value("scale"));
  EXPECT_EQ(scale.shape(), Shape{});
  EXPECT_EQ(scale.to_vector<float>(), std::vector<float>{2.0f});
  const Tensor& target = model->constants().at(*model->find_value("shape"));
  EXPECT_EQ(target.element_type(), ElementType::i64);
  EXPECT_EQ(target.to_vector<int64_t>(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(model->value(model->outputs()[0]).shape, (Shape{3, 2}));
}

TEST(OnnxReader, ConstantGraphOutputIsProducedThroughIdentity) {
  auto m = onnx_model();
  auto* c = onnx_node(m, "Constant", {}, {"values"});
  onnx_ints_attribute(c, "value_ints", {4, 5, 6});
  onnx_output(m, "values", onnx::TensorProto::INT64, {3});

  auto model = read(m);
  ASSERT_EQ(model->outputs().size(), 1u);
  ValueId out = model->outputs()[0];
  EXPECT_EQ(model->value(out).name, "values");
  EXPECT_FALSE(model->is_constant(out));
  ASSERT_EQ(model->nodes().size(), 1u);
  const Node& identity = model->nodes()[0];
  EXPECT_EQ(identity.op_type, "Identity");
  ASSERT_EQ(identity.inputs.size(), 1u);
  EXPECT_EQ(model->constants().at(identity.inputs[0]).to_vector<int64_t>(),
            (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(model->value(out).type, ElementType::i64);
  EXPECT_EQ(model->value(out).shape, Shape{3});
}

TEST(OnnxReader, DynamicBatchDimension) {
  auto m = onnx_model();
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {"batch", 3});
  // A dimension with neither value nor name is unknown, which is dynamic as well.
  auto* second = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type();
  second->mutable_shape()->add_dim();
  onnx_node(m, "Relu", {"x"}, {"y"});
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {"batch", 3, "?"});
  auto model = read(m);
  const ValueInfo& x = model->value(model->inputs()[0]);
  EXPECT_EQ(x.shape, (Shape{Shape::dynamic, 3, Shape::dynamic}));
  EXPECT_EQ(model->value(model->outputs()[0]).shape, (Shape{Shape::dynamic, 3, Shape::dynamic}));
}

TEST(OnnxReader, AttributesKeepTheirTypes) {
  auto m = onnx_model();
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {1, 1, 4, 4});
  *m.mutable_graph()->add_initializer() = onnx_raw_f32("w", {1, 1, 2, 2}, {1.f, 1.f, 1.f, 1.f});
  auto* conv = onnx_node(m, "Conv", {"x", "w"}, {"c"}, "conv");
  onnx_ints_attribute(conv, "strides", {2, 2});
  onnx_ints_attribute(conv, "kernel_shape", {2, 2});
  onnx_string_attribute(conv, "auto_pad", "VALID");
  onnx_int_attribute(conv, "group", 1);
  auto* leaky = onnx_node(m, "LeakyRelu", {"c"}, {"y"}, "leaky");
  onnx_float_attribute(leaky, "alpha", 0.25f);
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {1, 1, 2, 2});

  auto model = read(m);
  const Node& c = node_named(*model, "conv");
  EXPECT_EQ(c.attributes.get_ints("strides"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(c.attributes.get_string("auto_pad"), "VALID");
  EXPECT_EQ(c.attributes.get_int("group"), 1);
  EXPECT_DOUBLE_EQ(node_named(*model, "leaky").attributes.get_float("alpha"), 0.25);
  EXPECT_EQ(model->value(model->outputs()[0]).shape, (Shape{1, 1, 2, 2}));
}

TEST(OnnxReader, EmptyInputNamesAreOmittedOptionalInputs) {
  auto m = onnx_model(13);
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {4});
  auto* c = m.mutable_graph()->add_initializer();
  c->set_name("hi");
  c->set_data_type(onnx::TensorProto::FLOAT);
  c->add_float_data(1.0f);
  onnx_node(m, "Clip", {"x", "", "hi"}, {"clipped"}, "clip_max_only");
  onnx_node(m, "Clip", {"clipped", "", ""}, {"y"}, "clip_trailing");
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {4});

  auto model = read(m);
  const Node& max_only = node_named(*model, "clip_max_only");
  ASSERT_EQ(max_only.inputs.size(), 3u);
  EXPECT_EQ(max_only.inputs[1], no_value);
  EXPECT_EQ(max_only.inputs[2], *model->find_value("hi"));
  // Trailing omitted inputs are dropped.
  EXPECT_EQ(node_named(*model, "clip_trailing").inputs.size(), 1u);
}

TEST(OnnxReader, UnnamedAndDuplicateNodeNamesAreMadeUnique) {
  auto m = onnx_model();
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {2});
  onnx_node(m, "Relu", {"x"}, {"a"});
  onnx_node(m, "Relu", {"a"}, {"b"}, "same");
  onnx_node(m, "Relu", {"b"}, {"y"}, "same");
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {2});
  auto model = read(m);
  std::set<std::string> names;
  for (const Node& n : model->nodes()) names.insert(n.name);
  EXPECT_EQ(names.size(), 3u);
  EXPECT_TRUE(names.count("same"));
  EXPECT_TRUE(names.count("Relu_0"));
}

// ---- external data ------------------------------------------------------------------------------

// A model whose initializer "w" (f32 [2,3]) lives in `location` at `offset`.
onnx::ModelProto external_model(const std::string& location, int64_t offset, int64_t length = -1) {
  auto m = onnx_add_relu_model();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto entry = [&](const std::string& key, const std::string& value) {
    auto* e = w->add_external_data();
    e->set_key(key);
    e->set_value(value);
  };
  entry("location", location);
  entry("offset", std::to_string(offset));
  if (length >= 0) entry("length", std::to_string(length));
  return m;
}

std::string weight_file_bytes(size_t padding) {
  std::vector<float> w = {10.f, 20.f, 30.f, 40.f, 50.f, 60.f};
  return std::string(padding, '\x7f') +
         std::string(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float));
}

TEST(OnnxReader, ExternalDataRelativeToTheModelFile) {
  TempDir dir;
  fs::create_directories(dir.path() / "weights");
  dir.write("weights/w.bin", weight_file_bytes(16));
  fs::path model_path = dir.write("model.onnx", serialize(external_model("weights/w.bin", 16, 24)));

  auto model = read_onnx_model(model_path.string());
  EXPECT_EQ(model->name(), "test_graph");
  EXPECT_EQ(model->constants().at(*model->find_value("w")).to_vector<float>(),
            (std::vector<float>{10, 20, 30, 40, 50, 60}));
}

TEST(OnnxReader, ExternalDataFromBufferNeedsABaseDirectory) {
  TempDir dir;
  dir.write("w.bin", weight_file_bytes(0));
  auto m = external_model("w.bin", 0);
  auto model = read(m, dir.path().string());
  EXPECT_EQ(model->constants().at(*model->find_value("w")).to_vector<float>()[5], 60.f);

  std::string message = error_of<ModelError>([&] { read(m); });
  EXPECT_THAT(message, AllOf(HasSubstr("<memory buffer>"), HasSubstr("initializer 'w'"),
                             HasSubstr("'w.bin'"), HasSubstr("without a base directory")));
}

TEST(OnnxReader, MissingExternalDataFileIsNamed) {
  TempDir dir;
  fs::path model_path = dir.write("model.onnx", serialize(external_model("absent.bin", 0)));
  std::string message = error_of<ModelError>([&] { read_onnx_model(model_path.string()); });
  EXPECT_THAT(message,
              AllOf(HasSubstr(model_path.string() + ": "), HasSubstr("initializer 'w'"),
                    HasSubstr((dir.path() / "absent.bin").string()), HasSubstr("does not exist")));
}

TEST(OnnxReader, ExternalDataThatIsTooShortOrHasAWrongLength) {
  TempDir dir;
  dir.write("w.bin", weight_file_bytes(0));
  EXPECT_THAT(error_of<ModelError>([&] { read(external_model("w.bin", 8), dir.path().string()); }),
              AllOf(HasSubstr("has 24 bytes"), HasSubstr("[8, 32)")));
  EXPECT_THAT(
      error_of<ModelError>([&] { read(external_model("w.bin", 0, 20), dir.path().string()); }),
      HasSubstr("length 20 bytes does not match"));
}

TEST(OnnxReader, ExternalDataMustStayInTheModelDirectory) {
  TempDir dir;
  EXPECT_THAT(
      error_of<ModelError>([&] { read(external_model("../w.bin", 0), dir.path().string()); }),
      HasSubstr("leaves the model's directory"));
  EXPECT_THAT(
      error_of<ModelError>([&] { read(external_model("/etc/passwd", 0), dir.path().string()); }),
      HasSubstr("absolute path"));
}

// ---- errors -------------------------------------------------------------------------------------

TEST(OnnxReaderErrors, MissingFileIsInvalidArgumentNamingThePath) {
  TempDir dir;
  const std::string path = (dir.path() / "nope.onnx").string();
  EXPECT_THAT(error_of<InvalidArgument>([&] { read_onnx_model(path); }), HasSubstr(path));
}

TEST(OnnxReaderErrors, NotAnOnnxFile) {
  TempDir dir;
  fs::path text = dir.write("notes.onnx", "hello, this is a text file and not a model\n");
  EXPECT_THAT(error_of<FormatError>([&] { read_onnx_model(text.string()); }),
              AllOf(HasSubstr(text.string() + ": "), HasSubstr("not an ONNX model")));
  fs::path empty = dir.write("empty.onnx", "");
  EXPECT_THAT(error_of<FormatError>([&] { read_onnx_model(empty.string()); }),
              AllOf(HasSubstr(empty.string()), HasSubstr("empty")));
  // Valid protobuf but another message: a serialized TensorProto.
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(2);
  t.add_float_data(1.f);
  t.add_float_data(2.f);
  fs::path tensor = dir.write("tensor.onnx", t.SerializeAsString());
  EXPECT_THAT(error_of<FormatError>([&] { read_onnx_model(tensor.string()); }),
              HasSubstr("not an ONNX model"));
}

TEST(OnnxReaderErrors, TruncatedFile) {
  TempDir dir;
  std::string bytes = serialize(onnx_add_relu_model());
  fs::path cut = dir.write("cut.onnx", bytes.substr(0, bytes.size() * 2 / 3));
  EXPECT_THAT(
      error_of<FormatError>([&] { read_onnx_model(cut.string()); }),
      AllOf(HasSubstr(cut.string() + ": "), HasSubstr("truncated"), HasSubstr("field 'graph'")));
}

TEST(OnnxReaderErrors, UnknownOpNamesTypeNodeAndOpset) {
  auto m = onnx_model(15);
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {2});
  onnx_node(m, "Frobnicate", {"x"}, {"f"}, "frob1");
  auto* custom = onnx_node(m, "FusedThing", {"f"}, {"y"}, "fused");
  custom->set_domain("com.example");
  auto* import = m.add_opset_import();
  import->set_domain("com.example");
  import->set_version(2);
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {2});
  std::string message = error_of<UnsupportedOperation>([&] { read(m); });
  EXPECT_THAT(message,
              AllOf(HasSubstr("<memory buffer>: "), HasSubstr("'Frobnicate'"),
                    HasSubstr("node 'frob1'"), HasSubstr("opset 15"), HasSubstr("'FusedThing'"),
                    HasSubstr("domain 'com.example'"), HasSubstr("opset 2")));

  TempDir dir;
  fs::path p = dir.write("frob.onnx", serialize(m));
  EXPECT_THAT(error_of<UnsupportedOperation>([&] { read_onnx_model(p.string()); }),
              HasSubstr(p.string() + ": "));
}

// A model with one Adagrad node of domain ai.onnx.preview.training named `op_type`.
onnx::ModelProto training_domain_model(const std::string& op_type) {
  auto m = onnx_model(15);
  auto* import = m.add_opset_import();
  import->set_domain("ai.onnx.preview.training");
  import->set_version(1);
  onnx_input(m, "R", onnx::TensorProto::FLOAT, {});
  onnx_input(m, "T", onnx::TensorProto::INT64, {});
  for (const char* name : {"X", "G", "H"}) onnx_input(m, name, onnx::TensorProto::FLOAT, {2});
  onnx_node(m, op_type, {"R", "T", "X", "G", "H"}, {"X_new", "H_new"}, "step")
      ->set_domain("ai.onnx.preview.training");
  onnx_output(m, "X_new", onnx::TensorProto::FLOAT, {2});
  onnx_output(m, "H_new", onnx::TensorProto::FLOAT, {2});
  return m;
}

TEST(OnnxReader, NodesOfTheTrainingDomainGetTheirDomainInTheirOpType) {
  auto model = read(training_domain_model("Adagrad"));
  const Node& step = node_named(*model, "step");
  EXPECT_EQ(step.op_type, "ai.onnx.preview.training::Adagrad");
  EXPECT_EQ(model->value(step.outputs.at(1)).shape, (Shape{2}));
}

TEST(OnnxReaderErrors, AnUnknownOpOfTheTrainingDomainNamesDomainAndOp) {
  EXPECT_THAT(error_of<UnsupportedOperation>([&] { read(training_domain_model("Gradient")); }),
              AllOf(HasSubstr("op type 'Gradient'"), HasSubstr("node 'step'"),
                    HasSubstr("domain 'ai.onnx.preview.training'"), HasSubstr("opset 1")));
  // The optimizers are not default-domain ops: an Adagrad without the domain is unknown.
  auto m = training_domain_model("Adagrad");
  m.mutable_graph()->mutable_node(0)->clear_domain();
  EXPECT_THAT(error_of<UnsupportedOperation>([&] { read(m); }),
              AllOf(HasSubstr("op type 'Adagrad'"), HasSubstr("domain 'ai.onnx'")));
}

TEST(OnnxReaderErrors, ShapeThatCannotBeInferredNamesTheNode) {
  auto m = onnx_model();
  onnx_input(m, "a", onnx::TensorProto::FLOAT, {2, 3});
  onnx_input(m, "b", onnx::TensorProto::FLOAT, {4, 5});
  onnx_node(m, "Add", {"a", "b"}, {"y"}, "bad_add");
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {"d0", "d1"});
  EXPECT_THAT(error_of<ModelError>([&] { read(m); }),
              AllOf(HasSubstr("<memory buffer>: "), HasSubstr("bad_add")));
}

TEST(OnnxReaderErrors, UnsupportedElementTypesAndValueKinds) {
  auto complex = onnx_model();
  onnx_input(complex, "s", onnx::TensorProto::COMPLEX64, {2});
  onnx_node(complex, "Identity", {"s"}, {"y"});
  onnx_output(complex, "y", onnx::TensorProto::COMPLEX64, {2});
  EXPECT_THAT(error_of<UnsupportedOperation>([&] { read(complex); }),
              AllOf(HasSubstr("graph input 's'"), HasSubstr("COMPLEX64")));
  // Strings are supported: a string input passes through Identity.
  auto strings = onnx_model();
  onnx_input(strings, "s", onnx::TensorProto::STRING, {2});
  onnx_node(strings, "Identity", {"s"}, {"y"});
  onnx_output(strings, "y", onnx::TensorProto::STRING, {2});
  EXPECT_EQ(read(strings)->value(read(strings)->inputs()[0]).type, ElementType::string);

  auto sequence = onnx_model();
  auto* in = sequence.mutable_graph()->add_input();
  in->set_name("seq");
  in->mutable_type()
      ->mutable_sequence_type()
      ->mutable_elem_type()
      ->mutable_tensor_type()
      ->set_elem_type(onnx::TensorProto::FLOAT);
  onnx_node(sequence, "Identity", {"seq"}, {"y"});
  *sequence.mutable_graph()->add_output() = *in;
  sequence.mutable_graph()->mutable_output(0)->set_name("y");
  EXPECT_THAT(error_of<UnsupportedOperation>([&] { read(sequence); }),
              AllOf(HasSubstr("graph input 'seq'"), HasSubstr("sequence")));
}

TEST(OnnxReaderErrors, RawDataOfTheWrongSize) {
  auto m = onnx_add_relu_model();
  m.mutable_graph()->mutable_initializer(0)->mutable_raw_data()->resize(20);
  EXPECT_THAT(error_of<ModelError>([&] { read(m); }),
              AllOf(HasSubstr("initializer 'w'"), HasSubstr("20 bytes"), HasSubstr("need 24")));
}

TEST(OnnxReaderErrors, UndefinedInputValue) {
  auto m = onnx_model();
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {2});
  onnx_node(m, "Add", {"x", "ghost"}, {"y"}, "adder");
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {2});
  EXPECT_THAT(error_of<ModelError>([&] { read(m); }), HasSubstr("ghost"));
}

// ---- tensor files -------------------------------------------------------------------------------

TEST(OnnxTensorFile, ReadsATensorProtoFile) {
  TempDir dir;
  fs::path p = dir.write("input_0.pb", onnx_raw_f32("x", {3}, {1.f, 2.f, 3.f}).SerializeAsString());
  Tensor t = read_onnx_tensor(p.string());
  EXPECT_EQ(t.shape(), Shape{3});
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

}  // namespace
}  // namespace troupe
