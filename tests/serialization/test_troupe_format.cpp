// troupe's own model format (.troupe): round trips of every element and attribute type, the file
// layout (aligned, mapped weights), outputs through Core, and every refusal of a bad file.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "serialization/byte_io.hpp"
#include "serialization/fingerprint.hpp"
#include "serialization/troupe_format.hpp"
#include "tests/serialization/onnx_test_models.hpp"
#include "tests/serialization/serialization_test_util.hpp"
#include "troupe/core.hpp"
#include "troupe/serialize.hpp"

namespace troupe {
namespace {

using test::error_of;
using ::testing::HasSubstr;

// ---- fingerprint64 ------------------------------------------------------------------------------

TEST(Fingerprint, MatchesTheIndependentReference) {
  // Values from an independent Python implementation of the algorithm (four lanes of word-wise
  // multiply/rotate, the tail's whole words then its zero-padded rest into the next lanes, the
  // lanes and the length folded together, then the murmur3 finalizer).
  EXPECT_EQ(serialization::fingerprint64("", 0), 0x0d990e98f200f0deull);
  EXPECT_EQ(serialization::fingerprint64("abc", 3), 0x4e580747759828c1ull);
  EXPECT_EQ(serialization::fingerprint64("troupe model cache", 18), 0xc3b125c943136bbdull);
  unsigned char bytes[100];
  for (int i = 0; i < 100; ++i) bytes[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(serialization::fingerprint64(bytes, 20), 0x89b7adb7f472f15dull);
  EXPECT_EQ(serialization::fingerprint64(bytes, 100), 0x2570d115cc0cb2b9ull);
  EXPECT_EQ(serialization::fingerprint64("abc", 3, 42), 0xb80c6b3b20fb91eaull);
  EXPECT_EQ(serialization::to_hex(0x00ab0000000000cdull), "00ab0000000000cd");
}

TEST(Fingerprint, StreamingEqualsOneShotAndEveryByteFlipIsSeen) {
  std::vector<unsigned char> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 7 + 3);
  const uint64_t whole = serialization::fingerprint64(data.data(), data.size());
  serialization::Fingerprint64 parts;
  parts.update(data.data(), 3).update(data.data() + 3, 13).update(data.data() + 16, 50);
  parts.update(data.data() + 66, 934);
  EXPECT_EQ(parts.digest(), whole);
  serialization::Fingerprint64 bytewise;
  for (unsigned char c : data) bytewise.update(&c, 1);
  EXPECT_EQ(bytewise.digest(), whole);
  for (size_t i = 0; i < data.size(); i += 37) {
    for (unsigned char bit : {0x01, 0x80}) {
      data[i] ^= bit;
      EXPECT_NE(serialization::fingerprint64(data.data(), data.size()), whole) << "byte " << i;
      data[i] ^= bit;
    }
  }
  // Trailing zeros change the length, so the digest.
  std::vector<unsigned char> longer(data);
  longer.push_back(0);
  EXPECT_NE(serialization::fingerprint64(longer.data(), longer.size()), whole);
}

// ---- round trips --------------------------------------------------------------------------------

template <class T>
Tensor tensor_of(const Shape& shape, const std::vector<T>& values) {
  return Tensor::from_vector<T>(shape, values);
}

std::string bytes_of(const Tensor& t) {
  Tensor d = t.contiguous();
  if (d.element_type() == ElementType::string) {  // the text, each string after its length
    std::string out;
    for (const std::string& s : d.to_vector<std::string>())
      out += std::to_string(s.size()) + ":" + s;
    return out;
  }
  return std::string(static_cast<const char*>(d.raw_data()), d.byte_size());
}

// Compares two models by names (ids may differ), types, shapes, attributes and constant bytes.
void expect_same_model(const Model& a, const Model& b) {
  EXPECT_EQ(a.name(), b.name());
  ASSERT_EQ(a.values().size(), b.values().size());
  for (size_t i = 0; i < a.values().size(); ++i) {
    const ValueInfo& va = a.values()[i];
    auto id = b.find_value(va.name);
    ASSERT_TRUE(id) << va.name;
    EXPECT_EQ(b.value(*id).type, va.type) << va.name;
    EXPECT_EQ(b.value(*id).shape, va.shape) << va.name;
    EXPECT_EQ(a.is_constant(static_cast<ValueId>(i)), b.is_constant(*id)) << va.name;
    if (a.is_constant(static_cast<ValueId>(i))) {
      EXPECT_EQ(bytes_of(a.constants().at(static_cast<ValueId>(i))),
                bytes_of(b.constants().at(*id)))
          << va.name;
    }
  }
  auto names = [](const Model& m, const std::vector<ValueId>& ids) {
    std::vector<std::string> out;
    for (ValueId id : ids) out.push_back(id == no_value ? "<none>" : m.value(id).name);
    return out;
  };
  EXPECT_EQ(names(a, a.inputs()), names(b, b.inputs()));
  EXPECT_EQ(names(a, a.outputs()), names(b, b.outputs()));
  ASSERT_EQ(a.nodes().size(), b.nodes().size());
  for (size_t n = 0; n < a.nodes().size(); ++n) {
    const Node& na = a.nodes()[n];
    const Node& nb = b.nodes()[n];
    EXPECT_EQ(na.name, nb.name);
    EXPECT_EQ(na.op_type, nb.op_type);
    EXPECT_EQ(names(a, na.inputs), names(b, nb.inputs)) << na.name;
    EXPECT_EQ(names(a, na.outputs), names(b, nb.outputs)) << na.name;
    ASSERT_EQ(na.attributes.all().size(), nb.attributes.all().size()) << na.name;
    for (const auto& [key, value] : na.attributes.all()) {
      ASSERT_TRUE(nb.attributes.has(key)) << key;
      const AttributeValue& other = nb.attributes.all().at(key);
      ASSERT_EQ(value.index(), other.index()) << key;
      if (const auto* t = std::get_if<Tensor>(&value)) {
        const Tensor& u = std::get<Tensor>(other);
        EXPECT_EQ(t->element_type(), u.element_type()) << key;
        EXPECT_EQ(t->shape(), u.shape()) << key;
        EXPECT_EQ(bytes_of(*t), bytes_of(u)) << key;
      } else if (const auto* f = std::get_if<double>(&value)) {
        const double g = std::get<double>(other);
        EXPECT_EQ(std::memcmp(f, &g, sizeof g), 0) << key;  // bit-exact, NaN and -0 included
      } else if (const auto* fs = std::get_if<std::vector<double>>(&value)) {
        const auto& gs = std::get<std::vector<double>>(other);
        ASSERT_EQ(fs->size(), gs.size()) << key;
        EXPECT_EQ(std::memcmp(fs->data(), gs.data(), fs->size() * sizeof(double)), 0) << key;
      } else if (const auto* i = std::get_if<int64_t>(&value)) {
        EXPECT_EQ(*i, std::get<int64_t>(other)) << key;
      } else if (const auto* s = std::get_if<std::string>(&value)) {
        EXPECT_EQ(*s, std::get<std::string>(other)) << key;
      } else if (const auto* is = std::get_if<std::vector<int64_t>>(&value)) {
        EXPECT_EQ(*is, std::get<std::vector<int64_t>>(other)) << key;
      } else {
        EXPECT_EQ(std::get<std::vector<std::string>>(value),
                  std::get<std::vector<std::string>>(other))
            << key;
      }
    }
  }
}

// One constant of every element type, each passed through an Identity node to a model output,
// plus a dynamic-shaped input.
std::shared_ptr<Model> make_every_type_model() {
  ModelBuilder b("every_type");
  auto x = b.input("x", ElementType::f32, {Shape::dynamic, 2});
  b.output(b.op("Identity", {x}, {}, "id_x"), "x_out");
  std::vector<std::pair<std::string, Tensor>> constants = {
      {"c_f32",
       tensor_of<float>({2, 2}, {1.5f, -2.25f, 0.f, std::numeric_limits<float>::infinity()})},
      {"c_f16", tensor_of<float16>({3}, {float16(1.5f), float16(-0.25f), float16(65504.f)})},
      {"c_bf16", tensor_of<bfloat16>({2}, {bfloat16(3.f), bfloat16(-1e30f)})},
      {"c_f64", tensor_of<double>({2}, {1e-300, -3.5})},
      {"c_i8", tensor_of<int8_t>({3}, {-128, 0, 127})},
      {"c_u8", tensor_of<uint8_t>({3}, {0, 128, 255})},
      {"c_i32", tensor_of<int32_t>({2}, {std::numeric_limits<int32_t>::min(), 7})},
      {"c_i64", tensor_of<int64_t>({1, 2}, {std::numeric_limits<int64_t>::max(), -1})},
      {"c_bool", tensor_of<bool>({4}, {true, false, false, true})},
      {"c_i16", tensor_of<int16_t>({2}, {-32768, 32767})},
      {"c_u16", tensor_of<uint16_t>({2}, {0, 65535})},
      {"c_u32", tensor_of<uint32_t>({2}, {4294967295u, 3})},
      {"c_u64", tensor_of<uint64_t>({2}, {std::numeric_limits<uint64_t>::max(), 5})},
      {"c_scalar", tensor_of<float>({}, {42.f})},
      {"c_empty", Tensor(ElementType::f32, Shape{0, 3})},
      {"c_string", tensor_of<std::string>({2, 2}, {"", "a string longer than SSO keeps",
                                                   std::string("\xff\x00z", 3), "naïve"})},
  };
  for (auto& [name, data] : constants) {
    auto c = b.constant(name, data);
    b.output(b.op("Identity", {c}, {}, "id_" + name), name + "_out");
  }
  return b.build();
}

TEST(TroupeFormat, EveryElementTypeRoundTrips) {
  test::TempDir dir("ser_types");
  auto model = make_every_type_model();
  const std::string path = dir.file("every_type.troupe");
  save_model(model, path);
  auto back = serialization::read_troupe_model(path);
  expect_same_model(*model, *back);
  EXPECT_EQ(back->value(back->inputs()[0]).shape, Shape({Shape::dynamic, 2}));
  EXPECT_EQ(back->constants().at(*back->find_value("c_u8")).to_vector<uint8_t>(),
            (std::vector<uint8_t>{0, 128, 255}));
  EXPECT_EQ(back->constants().at(*back->find_value("c_i64")).to_vector<int64_t>(),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max(), -1}));
  EXPECT_EQ(back->constants().at(*back->find_value("c_i16")).to_vector<int16_t>(),
            (std::vector<int16_t>{-32768, 32767}));
  EXPECT_EQ(back->constants().at(*back->find_value("c_u16")).to_vector<uint16_t>(),
            (std::vector<uint16_t>{0, 65535}));
  EXPECT_EQ(back->constants().at(*back->find_value("c_u32")).to_vector<uint32_t>(),
            (std::vector<uint32_t>{4294967295u, 3}));
  EXPECT_EQ(back->constants().at(*back->find_value("c_u64")).element_type(), ElementType::u64);
  EXPECT_EQ(back->constants().at(*back->find_value("c_u64")).to_vector<uint64_t>(),
            (std::vector<uint64_t>{std::numeric_limits<uint64_t>::max(), 5}));
  EXPECT_EQ(back->constants().at(*back->find_value("c_empty")).shape(), Shape({0, 3}));
  EXPECT_EQ(back->constants().at(*back->find_value("c_scalar")).to_vector<float>(),
            std::vector<float>{42.f});
  const Tensor& strings = back->constants().at(*back->find_value("c_string"));
  ASSERT_EQ(strings.element_type(), ElementType::string);
  EXPECT_EQ(strings.to_vector<std::string>()[1], "a string longer than SSO keeps");
  EXPECT_EQ(strings.to_vector<std::string>()[2], std::string("\xff\x00z", 3));
}

TEST(TroupeFormat, EveryAttributeTypeRoundTrips) {
  ModelBuilder b("attributes");
  auto x = b.input("x", ElementType::f32, {2});
  const std::string odd_bytes("na\xff\xfe\0me", 7);  // not UTF-8, with a NUL
  Attributes attrs = {
      {"i", int64_t{std::numeric_limits<int64_t>::min()}},
      {"i_zero", int64_t{0}},
      {"f", -0.0},
      {"f_nan", std::numeric_limits<double>::quiet_NaN()},
      {"f_inf", -std::numeric_limits<double>::infinity()},
      {"f_tiny", 4.9e-324},
      {"s", odd_bytes},
      {"s_empty", std::string()},
      {"ints", std::vector<int64_t>{3, -1, 0, std::numeric_limits<int64_t>::max()}},
      {"ints_empty", std::vector<int64_t>{}},
      {"floats", std::vector<double>{0.5, -1e300, 2.0}},
      {"strings", std::vector<std::string>{"a", "", odd_bytes}},
      {"t_i64", tensor_of<int64_t>({2, 2}, {1, 2, 3, 4})},
      {"t_bf16", tensor_of<bfloat16>({1}, {bfloat16(0.5f)})},
      {"t_bool", tensor_of<bool>({3}, {false, true, true})},
  };
  b.output(b.op("Identity", {x}, attrs, "id"), "y");
  auto model = b.build();
  test::TempDir dir("ser_attrs");
  const std::string path = dir.file("attributes.troupe");
  save_model(model, path);
  auto back = serialization::read_troupe_model(path);
  expect_same_model(*model, *back);
  const Attributes& a = back->nodes()[0].attributes;
  EXPECT_EQ(a.get_int("i"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(a.get_string("s"), odd_bytes);
  EXPECT_TRUE(std::signbit(a.get_float("f")));
  EXPECT_TRUE(std::isnan(a.get_float("f_nan")));
  EXPECT_EQ(a.get_tensor("t_i64").to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4}));
}

TEST(TroupeFormat, FileLayoutHasAlignedWeightsThatAreMappedNotCopied) {
  test::TempDir dir("ser_layout");
  ModelBuilder b("shared");
  auto x = b.input("x", ElementType::f32, {4});
  Tensor w = tensor_of<float>({4}, {1.f, 2.f, 3.f, 4.f});
  auto c1 = b.constant("w1", w);
  auto c2 = b.constant("w2", w);  // the same memory: stored once
  auto c3 = b.constant("w3", tensor_of<float>({4}, {5.f, 6.f, 7.f, 8.f}));
  b.output(b.op("Add", {b.op("Add", {x, c1}), b.op("Add", {c2, c3})}), "y");
  auto model = b.build();
  const std::string path = dir.file("shared.troupe");
  save_model(model, path);

  const std::string file = test::read_bytes(path);
  ASSERT_GE(file.size(), 64u);
  const auto* p = reinterpret_cast<const unsigned char*>(file.data());
  EXPECT_EQ(file.substr(0, 8), "TROUPEMD");
  EXPECT_EQ(serialization::get_le(p + 8, 4), 1u);    // format version
  EXPECT_EQ(serialization::get_le(p + 12, 4), 64u);  // header length
  EXPECT_EQ(serialization::get_le(p + 16, 8), 64u);  // graph offset
  const uint64_t weights_offset = serialization::get_le(p + 40, 8);
  const uint64_t weights_length = serialization::get_le(p + 48, 8);
  EXPECT_EQ(weights_offset % 64, 0u);
  EXPECT_EQ(weights_length, 128u);  // two 16-byte segments, each padded to 64
  EXPECT_EQ(file.size(), weights_offset + weights_length);
  float first[4];
  std::memcpy(first, file.data() + weights_offset, sizeof first);
  EXPECT_EQ(first[0], 1.f);
  EXPECT_EQ(first[3], 4.f);
  float second[4];
  std::memcpy(second, file.data() + weights_offset + 64, sizeof second);
  EXPECT_EQ(second[0], 5.f);

  auto back = serialization::read_troupe_model(path);
  const Tensor& w1 = back->constants().at(*back->find_value("w1"));
  const Tensor& w2 = back->constants().at(*back->find_value("w2"));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w1.raw_data()) % 64, 0u);
  EXPECT_EQ(w1.raw_data(), w2.raw_data());  // both point at the one mapped segment
  EXPECT_TRUE(w1.owns_memory());
  EXPECT_EQ(w2.to_vector<float>(), (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
}

TEST(TroupeFormat, MappedWeightsOutliveTheModelAndTheFile) {
  test::TempDir dir("ser_lifetime");
  const std::string path = dir.file("m.troupe");
  save_model(test::make_small_cnn(), path);
  Tensor kept;
  {
    auto back = serialization::read_troupe_model(path);
    kept = back->constants().at(*back->find_value("fc_b"));
  }
  std::filesystem::remove(path);
  EXPECT_EQ(kept.to_vector<float>(), test::seeded_floats(10, 7 + 3));
}

TEST(TroupeFormat, SaveReadGivesTheSameOutputsThroughCore) {
  test::TempDir dir("ser_core");
  Core core;
  auto model = test::make_small_cnn();
  const std::string path = dir.file("small_cnn.troupe");
  save_model(model, path);
  EXPECT_THAT(core.supported_model_formats(), ::testing::Contains(std::string("troupe")));
  auto back = core.read_model(path);
  auto original = core.compile_model(model);
  auto reread = core.compile_model(back);
  const Tensor input = test::small_cnn_input();
  const auto expected = test::run_once(original, input);
  ASSERT_EQ(expected.size(), 10u);
  EXPECT_EQ(test::run_once(reread, input), expected);  // same kernels: bit-identical
  float sum = 0;
  for (float v : expected) sum += v;
  EXPECT_NEAR(sum, 1.f, 1e-5);  // a softmax
}

TEST(TroupeFormat, OnnxToTroupeAndBackGivesTheSameOutputs) {
  test::TempDir dir("ser_onnx");
  const std::string onnx_path = dir.file("add_relu.onnx");
  test::write_bytes(onnx_path, testing::serialize(testing::onnx_add_relu_model()));
  Core core;
  auto from_onnx = core.read_model(onnx_path);
  const std::string troupe_path = dir.file("add_relu.troupe");
  save_model(from_onnx, troupe_path);
  auto from_troupe = core.read_model(troupe_path);
  auto a = core.compile_model(from_onnx);
  auto b = core.compile_model(from_troupe);
  const Tensor x = tensor_of<float>({2, 3}, {0.5f, 0.5f, -5.f, 5.f, 0.f, 7.f});
  // y = relu(x + w), w = {1, -2, 3, -4, 5, -6}
  const std::vector<float> expected = {1.5f, 0.f, 0.f, 1.f, 5.f, 1.f};
  EXPECT_EQ(test::run_once(a, x), expected);
  EXPECT_EQ(test::run_once(b, x), expected);
}

// ---- refusals -----------------------------------------------------------------------------------

class TroupeFormatRefusal : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("good.troupe");
    save_model(test::make_small_cnn(), path_);
    good_ = test::read_bytes(path_);
  }
  // Writes `bytes` as a file and returns the FormatError message of reading it.
  std::string refusal(const std::string& bytes) {
    const std::string bad = dir_.file("bad.troupe");
    test::write_bytes(bad, bytes);
    return error_of<FormatError>([&] { serialization::read_troupe_model(bad); });
  }
  uint64_t field(size_t offset) const {
    return serialization::get_le(reinterpret_cast<const unsigned char*>(good_.data()) + offset, 8);
  }
  test::TempDir dir_{"ser_refusal"};
  std::string path_;
  std::string good_;
};

TEST_F(TroupeFormatRefusal, WrongMagic) {
  std::string bytes = good_;
  bytes[0] = 'X';
  EXPECT_THAT(refusal(bytes), HasSubstr("magic is 'XROUPEMD', expected 'TROUPEMD'"));
  EXPECT_THAT(refusal(""), HasSubstr("magic is missing (empty file)"));
  EXPECT_THAT(refusal(std::string("\x01\x02", 2)), HasSubstr("magic is 0x0102"));
}

TEST_F(TroupeFormatRefusal, NewerFormatVersion) {
  std::string bytes = good_;
  bytes[8] = 2;
  EXPECT_THAT(refusal(bytes), HasSubstr("format version 2, newer than this troupe reads (1)"));
}

TEST_F(TroupeFormatRefusal, TruncationNamesTheByte) {
  EXPECT_THAT(refusal(good_.substr(0, 12)),
              HasSubstr("truncated at byte 12: the header needs bytes [0, 16)"));
  EXPECT_THAT(refusal(good_.substr(0, 40)),
              HasSubstr("truncated at byte 40: the header needs bytes [0, 64)"));
  const uint64_t graph_length = field(24);
  EXPECT_THAT(refusal(good_.substr(0, 100)),
              HasSubstr("truncated at byte 100: the graph needs bytes [64, " +
                        std::to_string(64 + graph_length) + ")"));
  const uint64_t weights_offset = field(40);
  const size_t cut = good_.size() - 10;
  EXPECT_THAT(
      refusal(good_.substr(0, cut)),
      HasSubstr("truncated at byte " + std::to_string(cut) + ": the weights section needs bytes [" +
                std::to_string(weights_offset) + ", " + std::to_string(good_.size()) + ")"));
}

TEST_F(TroupeFormatRefusal, CorruptGraphFailsTheChecksum) {
  std::string bytes = good_;
  bytes[64 + field(24) / 2] ^= 0x10;
  EXPECT_THAT(refusal(bytes), HasSubstr("graph checksum mismatch"));
}

TEST_F(TroupeFormatRefusal, SegmentOutsideTheWeightsSection) {
  std::string bytes = good_;
  // Claim a 64-byte weights section: the later segments no longer fit.
  for (int i = 0; i < 8; ++i) bytes[48 + i] = static_cast<char>(i == 0 ? 64 : 0);
  EXPECT_THAT(refusal(bytes), HasSubstr("lies outside the weights section of 64 bytes"));
}

TEST_F(TroupeFormatRefusal, MissingFileAndUnknownExtension) {
  Core core;
  EXPECT_THAT(error_of<InvalidArgument>([&] { core.read_model(dir_.file("none.troupe")); }),
              HasSubstr("does not exist"));
  std::filesystem::create_directories(dir_.file("dir.troupe"));
  EXPECT_THAT(
      error_of<InvalidArgument>([&] { serialization::read_troupe_model(dir_.file("dir.troupe")); }),
      HasSubstr("is a directory"));
}

TEST(TroupeFormatSave, UnwritablePathNamesIt) {
  auto model = test::make_small_cnn();
  EXPECT_THAT(
      error_of<InvalidArgument>([&] { save_model(model, "/nonexistent_dir_troupe/m.troupe"); }),
      HasSubstr("/nonexistent_dir_troupe/m.troupe"));
  EXPECT_THROW(save_model(nullptr, "x.troupe"), InvalidArgument);
}

}  // namespace
}  // namespace troupe
