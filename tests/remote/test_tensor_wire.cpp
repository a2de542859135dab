// The wire form of tensors: exact round trips for every element type, and refusal of every kind
// of malformed message before anything large is allocated.

#include <gmock/gmock.h>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "../test_util.hpp"
#include "engine/runtime/node.hpp"
#include "troupe/actor_protocol.hpp"

using namespace troupe;
using ::testing::HasSubstr;

namespace {

struct WireTest : ::testing::Test {
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  void SetUp() override {
    detail::configure_actor_system(config, NodeOptions{}, false);
    system = std::make_unique<caf::actor_system>(config);
  }

  std::vector<char> save(NamedTensors tensors) {
    std::vector<char> buffer;
    caf::binary_serializer sink(*system, buffer);
    EXPECT_FALSE(sink(tensors));
    return buffer;
  }

  caf::error load(const std::vector<char>& buffer, NamedTensors& out) {
    caf::binary_deserializer source(*system, buffer);
    return source(out);
  }

  // A buffer holding one tensor named "t" as the fields given (the wire layout: map size, name,
  // type code, rank, dims, byte count, bytes).
  std::vector<char> raw(uint8_t type, std::vector<int64_t> dims, uint64_t bytes, size_t payload) {
    std::vector<char> buffer;
    caf::binary_serializer sink(*system, buffer);
    size_t entries = 1;
    std::string name = "t";
    uint32_t rank = static_cast<uint32_t>(dims.size());
    EXPECT_FALSE(sink.begin_sequence(entries));
    EXPECT_FALSE(sink(name, type, rank));
    for (auto& d : dims) EXPECT_FALSE(sink(d));
    EXPECT_FALSE(sink(bytes));
    buffer.resize(buffer.size() + payload, 7);
    return buffer;
  }

  std::string refusal(const std::vector<char>& buffer) {
    NamedTensors out;
    caf::error err = load(buffer, out);
    EXPECT_TRUE(err) << "a malformed buffer was accepted";
    return err ? system->render(err) : std::string();
  }
};

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.element_type() != b.element_type() || a.shape() != b.shape()) return false;
  Tensor da = a.contiguous(), db = b.contiguous();
  return std::memcmp(da.raw_data(), db.raw_data(), da.byte_size()) == 0;
}

}  // namespace

TEST_F(WireTest, EveryElementTypeRoundTripsExactly) {
  NamedTensors in;
  in["f32"] = test::random_tensor({2, 3, 4}, 1);
  in["f64"] = in["f32"].convert(ElementType::f64);
  in["f16"] = in["f32"].convert(ElementType::f16);
  in["bf16"] = in["f32"].convert(ElementType::bf16);
  in["i8"] = Tensor::from_vector<int8_t>({3}, {-128, 0, 127});
  in["u8"] = Tensor::from_vector<uint8_t>({2, 2}, {0, 1, 254, 255});
  in["i32"] = Tensor::from_vector<int32_t>({1}, {-2147483647});
  in["i64"] = Tensor::from_vector<int64_t>({2}, {INT64_MIN, INT64_MAX});
  in["bool"] = Tensor::from_vector<bool>({3}, {true, false, true});
  in["scalar"] = Tensor::from_vector<float>(Shape(std::vector<int64_t>{}), {3.5f});
  in["zero"] = Tensor(ElementType::f32, {0, 5});
  in["empty"] = Tensor();
  NamedTensors out;
  ASSERT_FALSE(load(save(in), out));
  ASSERT_EQ(out.size(), in.size());
  for (const auto& [name, tensor] : in) {
    if (tensor.empty()) {
      EXPECT_TRUE(out.at(name).empty()) << name;
      continue;
    }
    EXPECT_TRUE(same_bytes(tensor, out.at(name))) << name;
  }
}

TEST_F(WireTest, AStridedViewTravelsAsItsElements) {
  Tensor base = test::random_tensor({4, 6}, 2);
  // Every other column: a strided view of 4x3.
  Tensor view(ElementType::f32, {4, 3}, base.raw_data(), {24, 8});
  NamedTensors out;
  ASSERT_FALSE(load(save({{"v", view}}), out));
  EXPECT_TRUE(out.at("v").is_contiguous());
  EXPECT_EQ(out.at("v").to_vector<float>(), view.to_vector<float>());
}

TEST_F(WireTest, ATruncatedMessageIsRefused) {
  auto buffer = save({{"x", test::random_tensor({8, 8}, 3)}});
  for (size_t cut : {buffer.size() - 1, buffer.size() / 2, size_t{5}}) {
    std::vector<char> truncated(buffer.begin(), buffer.begin() + static_cast<long>(cut));
    refusal(truncated);
  }
}

TEST_F(WireTest, ByteCountMustMatchTheShape) {
  EXPECT_THAT(refusal(raw(1, {2, 3}, 20, 20)),
              HasSubstr("20 bytes for shape [2,3] of f32 (24 expected)"));
  EXPECT_THAT(refusal(raw(1, {2, 3}, 28, 28)), HasSubstr("24 expected"));
}

TEST_F(WireTest, UnknownTypesNegativeDimensionsAndHugeRanksAreRefused) {
  EXPECT_THAT(refusal(raw(200, {2}, 2, 2)), HasSubstr("unknown element type code 200"));
  EXPECT_THAT(refusal(raw(1, {2, -3}, 24, 24)), HasSubstr("dimension 1 is negative"));
  EXPECT_THAT(refusal(raw(1, std::vector<int64_t>(40, 1), 4, 4)), HasSubstr("rank 40 exceeds 16"));
  EXPECT_THAT(refusal(raw(0, {3}, 0, 0)), HasSubstr("empty tensor with a shape"));
}

TEST_F(WireTest, AbsurdSizesAreRefusedBeforeAllocating) {
  // 10^12 elements and a product that overflows int64: refused from the header alone.
  EXPECT_THAT(refusal(raw(1, {1000000, 1000000}, 4000000000000ull, 0)), HasSubstr("shape exceeds"));
  EXPECT_THAT(refusal(raw(6, {INT64_MAX, INT64_MAX}, 0, 0)), HasSubstr("shape exceeds"));
  // Plausible header, but more bytes announced than the message holds: 1 GiB is not allocated.
  EXPECT_THAT(refusal(raw(6, {1024, 1024, 1024}, uint64_t{1} << 30, 16)),
              HasSubstr("bytes announced, 16 in the message"));
}

TEST_F(WireTest, StringsTravelAsTheirTextAndLiesAboutItAreRefused) {
  NamedTensors in;
  in["text"] = Tensor::from_vector<std::string>(
      {2, 2}, {"", std::string(300, 'q'), std::string("nul\0inside", 10), "naïve"});
  // A strided view travels as its elements, like any tensor.
  std::string storage[4] = {"keep", "skip", "also kept", "skip"};
  in["view"] =
      Tensor(ElementType::string, {2}, storage, {static_cast<int64_t>(2 * sizeof(std::string))});
  NamedTensors out;
  ASSERT_FALSE(load(save(in), out));
  EXPECT_EQ(out.at("text").shape(), (Shape{2, 2}));
  EXPECT_EQ(out.at("text").to_vector<std::string>(), in["text"].to_vector<std::string>());
  EXPECT_EQ(out.at("view").to_vector<std::string>(),
            (std::vector<std::string>{"keep", "also kept"}));

  // The header announces 5 bytes of text; the strings hold 3, then 9.
  const auto strings_message = [&](uint64_t announced, std::vector<std::string> strings,
                                   std::vector<int64_t> dims) {
    std::vector<char> buffer;
    caf::binary_serializer sink(*system, buffer);
    size_t entries = 1;
    std::string name = "t";
    uint8_t type = static_cast<uint8_t>(ElementType::string);
    uint32_t rank = static_cast<uint32_t>(dims.size());
    EXPECT_FALSE(sink.begin_sequence(entries));
    EXPECT_FALSE(sink(name, type, rank));
    for (auto& d : dims) EXPECT_FALSE(sink(d));
    EXPECT_FALSE(sink(announced));
    for (auto& s : strings) EXPECT_FALSE(sink(s));
    return buffer;
  };
  EXPECT_THAT(refusal(strings_message(5, {"a", "bc"}, {2})),
              HasSubstr("announced 5 bytes of text and holds 3"));
  EXPECT_THAT(refusal(strings_message(5, {"abc", "defghi"}, {2})),
              HasSubstr("announced 5 bytes of text and holds more"));
  // A million empty strings announced in a message of a few bytes, and a billion: refused before
  // allocating.
  EXPECT_THAT(refusal(strings_message(0, {}, {1000, 1000})), HasSubstr("in the message"));
  EXPECT_THAT(refusal(strings_message(0, {}, {1000, 1000, 1000})),
              HasSubstr("exceeds 4294967296 bytes"));
}
