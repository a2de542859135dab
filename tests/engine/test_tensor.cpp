#include <gtest/gtest.h>

#include <cmath>

#include "troupe/tensor.hpp"

using namespace troupe;

TEST(ElementType, SizesNamesAndParsing) {
  EXPECT_EQ(element_size(ElementType::f32), 4u);
  EXPECT_EQ(element_size(ElementType::bf16), 2u);
  EXPECT_EQ(element_size(ElementType::i64), 8u);
  EXPECT_EQ(element_size(ElementType::boolean), 1u);
  EXPECT_EQ(to_string(ElementType::f16), "f16");
  EXPECT_EQ(element_type_from_string("fp32"), ElementType::f32);
  EXPECT_EQ(element_type_from_string("bool"), ElementType::boolean);
  EXPECT_THROW(element_type_from_string("f8"), InvalidArgument);
}

TEST(ElementType, ConvertibilityRules) {
  EXPECT_TRUE(is_convertible(ElementType::u8, ElementType::f32));
  EXPECT_TRUE(is_convertible(ElementType::f64, ElementType::bf16));
  EXPECT_TRUE(is_convertible(ElementType::i32, ElementType::i64));
  EXPECT_FALSE(is_convertible(ElementType::f32, ElementType::i32));
  EXPECT_FALSE(is_convertible(ElementType::boolean, ElementType::f32));
  EXPECT_TRUE(is_convertible(ElementType::boolean, ElementType::boolean));
}

TEST(ElementType, SixteenBitAndUnsignedWideTypes) {
  struct Expected {
    ElementType type;
    size_t size;
    const char* name;
    const char* alias;
  };
  for (const Expected& e : {Expected{ElementType::i16, 2, "i16", "int16"},
                            Expected{ElementType::u16, 2, "u16", "uint16"},
                            Expected{ElementType::u32, 4, "u32", "uint32"},
                            Expected{ElementType::u64, 8, "u64", "uint64"}}) {
    EXPECT_EQ(element_size(e.type), e.size) << e.name;
    EXPECT_EQ(to_string(e.type), e.name);
    EXPECT_EQ(element_type_from_string(e.name), e.type);
    EXPECT_EQ(element_type_from_string(e.alias), e.type);
    EXPECT_TRUE(is_integral(e.type)) << e.name;
    EXPECT_FALSE(is_floating(e.type)) << e.name;
    EXPECT_TRUE(is_convertible(e.type, ElementType::i64)) << e.name;
    EXPECT_TRUE(is_convertible(e.type, ElementType::f32)) << e.name;
    EXPECT_FALSE(is_convertible(ElementType::f32, e.type)) << e.name;
  }
  EXPECT_EQ(element_type_of<int16_t>::value, ElementType::i16);
  EXPECT_EQ(element_type_of<uint16_t>::value, ElementType::u16);
  EXPECT_EQ(element_type_of<uint32_t>::value, ElementType::u32);
  EXPECT_EQ(element_type_of<uint64_t>::value, ElementType::u64);
}

TEST(Tensor, HoldsAndConvertsTheNewIntegerTypes) {
  // u64 above 2^63 and u32 above 2^31 survive a round trip through the tensor unchanged.
  Tensor big =
      Tensor::from_vector<uint64_t>({2}, {18446744073709551615ull, 9223372036854775808ull});
  EXPECT_EQ(big.element_type(), ElementType::u64);
  EXPECT_EQ(big.byte_size(), 16u);
  EXPECT_EQ(big.to_vector<uint64_t>(),
            (std::vector<uint64_t>{18446744073709551615ull, 9223372036854775808ull}));
  Tensor u32 = Tensor::from_vector<uint32_t>({3}, {0, 4000000000u, 7});
  EXPECT_EQ(u32.value_at(1), 4000000000.0);
  // Widening conversions keep values: i16 -> i64 keeps the sign, u16 -> f32 the magnitude.
  Tensor i16 = Tensor::from_vector<int16_t>({3}, {-32768, -1, 32767});
  EXPECT_EQ(i16.convert(ElementType::i64).to_vector<int64_t>(),
            (std::vector<int64_t>{-32768, -1, 32767}));
  Tensor u16 = Tensor::from_vector<uint16_t>({2}, {65535, 1});
  EXPECT_EQ(u16.convert(ElementType::f32).to_vector<float>(), (std::vector<float>{65535.f, 1.f}));
  EXPECT_EQ(u32.convert(ElementType::i64).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 4000000000, 7}));
}

TEST(HalfTypes, RoundTripAndRounding) {
  for (float v : {0.f, 1.f, -2.5f, 65504.f, 0.000061035156f, 3.140625f})
    EXPECT_EQ(static_cast<float>(float16(v)), v) << v;
  EXPECT_TRUE(std::isinf(static_cast<float>(float16(1e6f))));
  // 1 + 2^-11 is halfway between two f16 values: ties to even -> 1.
  EXPECT_EQ(static_cast<float>(float16(1.f + 1.f / 2048)), 1.f);
  EXPECT_EQ(static_cast<float>(bfloat16(1.f)), 1.f);
  EXPECT_EQ(static_cast<float>(bfloat16(-3.f)), -3.f);
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1+2^-7: ties to even -> 1.
  EXPECT_EQ(static_cast<float>(bfloat16(1.f + 1.f / 256)), 1.f);
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16(std::nanf("")))));
  // f16 subnormal: 2^-24 is the smallest.
  EXPECT_EQ(static_cast<float>(float16(5.9604644775390625e-8f)), 5.9604644775390625e-8f);
}

TEST(Shape, BasicsAndDynamic) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.element_count(), 24);
  EXPECT_EQ(s.to_string(), "[2,3,4]");
  Shape d{-1, 3};
  EXPECT_FALSE(d.is_static());
  EXPECT_EQ(d.to_string(), "[?,3]");
  EXPECT_TRUE(d.accepts(Shape{7, 3}));
  EXPECT_FALSE(d.accepts(Shape{7, 4}));
  EXPECT_FALSE(d.accepts(Shape{3}));
  EXPECT_THROW(d.element_count(), InvalidArgument);
  EXPECT_EQ(row_major_strides(s), (std::vector<int64_t>{12, 4, 1}));
}

TEST(Tensor, OwnsZeroedAlignedMemory) {
  Tensor t(ElementType::f32, {2, 3});
  EXPECT_TRUE(t.owns_memory());
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.size(), 6);
  EXPECT_EQ(t.byte_size(), 24u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  for (float v : t.to_vector<float>()) EXPECT_EQ(v, 0.f);
  EXPECT_THROW(t.data<int32_t>(), TensorMismatch);
  EXPECT_THROW(Tensor(ElementType::f32, Shape{-1, 2}), InvalidArgument);
}

TEST(Tensor, WrapsCallerMemoryWithStridesWithoutCopy) {
  // A 4x5 image; take the 2x3 region starting at row 1, column 1.
  std::vector<float> image(20);
  for (int i = 0; i < 20; ++i) image[i] = static_cast<float>(i);
  Tensor region(ElementType::f32, {2, 3}, &image[1 * 5 + 1], {5 * 4, 4});
  EXPECT_FALSE(region.owns_memory());
  EXPECT_FALSE(region.is_contiguous());
  EXPECT_EQ(region.to_vector<float>(), (std::vector<float>{6, 7, 8, 11, 12, 13}));
  EXPECT_EQ(region.value_at(4), 12.0);
  image[12] = 100;  // visible through the view
  EXPECT_EQ(region.value_at(4), 100.0);
  Tensor dense = region.contiguous();
  EXPECT_TRUE(dense.is_contiguous());
  EXPECT_EQ(dense.to_vector<float>(), (std::vector<float>{6, 7, 8, 11, 100, 13}));
  EXPECT_THROW(Tensor(ElementType::f32, {2, 3}, image.data(), {20}), InvalidArgument);
  EXPECT_THROW(Tensor(ElementType::f32, {2, 3}, image.data(), {20, 3}), InvalidArgument);
}

TEST(Tensor, CopyToConvertsAndRespectsStrides) {
  Tensor src = Tensor::from_vector<uint8_t>({2, 2}, {0, 1, 254, 255});
  Tensor f = src.convert(ElementType::f32);
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{0, 1, 254, 255}));
  Tensor h = f.convert(ElementType::f16);
  EXPECT_EQ(h.value_at(3), 255.0);
  // Write into a strided destination (every other column of a 2x4 buffer).
  std::vector<float> buffer(8, -1.f);
  Tensor dst(ElementType::f32, {2, 2}, buffer.data(), {16, 8});
  f.copy_to(dst);
  EXPECT_EQ(buffer, (std::vector<float>{0, -1, 1, -1, 254, -1, 255, -1}));
  Tensor wrong(ElementType::f32, {4});
  EXPECT_THROW(f.copy_to(wrong), TensorMismatch);
  Tensor ints(ElementType::i32, {2, 2});
  EXPECT_THROW(f.copy_to(ints), TensorMismatch);  // float -> int is not a silent conversion
}

TEST(Tensor, ReshapedSharesMemory) {
  Tensor t = Tensor::from_vector<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor r = t.reshaped({3, 2});
  EXPECT_EQ(r.raw_data(), t.raw_data());
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_THROW(t.reshaped({4, 2}), TensorMismatch);
  EXPECT_THROW(Tensor::from_vector<float>({2, 2}, {1, 2, 3}), InvalidArgument);
}

TEST(Tensor, ScalarAndEmpty) {
  Tensor scalar = Tensor::from_vector<float>({}, {42.f});
  EXPECT_EQ(scalar.size(), 1);
  EXPECT_EQ(scalar.clone().value_at(0), 42.0);
  Tensor empty_dim(ElementType::f32, {0, 3});
  EXPECT_EQ(empty_dim.size(), 0);
  Tensor other(ElementType::f32, {0, 3});
  empty_dim.copy_to(other);
  EXPECT_TRUE(Tensor().empty());
}

// ---- string tensors
// ------------------------------------------------------------------------------

TEST(StringTensor, HoldsTextCopiesShareItClonesOwnIt) {
  EXPECT_EQ(to_string(ElementType::string), "string");
  EXPECT_EQ(element_type_from_string("string"), ElementType::string);
  EXPECT_EQ(element_size(ElementType::string), sizeof(std::string));
  EXPECT_FALSE(is_convertible(ElementType::string, ElementType::f32));
  EXPECT_FALSE(is_convertible(ElementType::i64, ElementType::string));
  // Longer than any small-string buffer: each element owns heap memory, which the sanitizer
  // stage checks is released once, with the last copy.
  const std::string long_text(100, 'x');
  Tensor t = Tensor::from_vector<std::string>({2, 2}, {"", "a", long_text, "naïve"});
  EXPECT_EQ(Tensor(ElementType::string, {3}).to_vector<std::string>(),
            (std::vector<std::string>{"", "", ""}));
  Tensor shared = t;
  Tensor deep = t.clone();
  shared.data<std::string>()[1] = "changed through a copy";
  deep.data<std::string>()[2] = "changed in the clone";
  EXPECT_EQ(t.to_vector<std::string>()[1], "changed through a copy");
  EXPECT_EQ(t.to_vector<std::string>()[2], long_text);
  EXPECT_EQ(deep.to_vector<std::string>()[1], "a");
  EXPECT_EQ(t.reshaped({4}).to_vector<std::string>()[3], "naïve");
  EXPECT_THROW(t.value_at(0), TensorMismatch);
  EXPECT_THROW(t.convert(ElementType::f32), TensorMismatch);
  EXPECT_THROW(t.data<float>(), TensorMismatch);
}

TEST(StringTensor, StridedCopiesAssignEachElement) {
  std::string storage[6] = {"r0c0", "r0c1", "r0c2", std::string(40, 'y'), "r1c1", "r1c2"};
  // Columns 0 and 2 of a 2x3 array of strings the caller owns.
  const auto size = static_cast<int64_t>(sizeof(std::string));
  Tensor view(ElementType::string, {2, 2}, storage, {3 * size, 2 * size});
  EXPECT_FALSE(view.is_contiguous());
  EXPECT_EQ(view.to_vector<std::string>(),
            (std::vector<std::string>{"r0c0", "r0c2", std::string(40, 'y'), "r1c2"}));
  Tensor dense(ElementType::string, {2, 2});
  view.copy_to(dense);
  storage[0] = "overwritten";  // the copy owns its text
  EXPECT_EQ(dense.to_vector<std::string>()[0], "r0c0");
  dense.copy_to(view);  // and back into the strided region, over the old text
  EXPECT_EQ(storage[0], "r0c0");
  EXPECT_EQ(storage[1], "r0c1");  // untouched: not in the view
}
