// The .npy reader and writer: files numpy wrote (tests/serialization/data/npy, made by
// make_npy_fixtures.py there), round trips of every element type, and every way a file can be bad.

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "serialization/npy_format.hpp"
#include "serialization_test_util.hpp"
#include "troupe/error.hpp"

namespace troupe {
namespace {

using serialization::parse_npy;
using serialization::read_npy;
using serialization::to_npy_bytes;
using serialization::write_npy;
using test::error_of;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string fixture(const std::string& name) {
  return std::string(TROUPE_SOURCE_DIR) + "/tests/serialization/data/npy/" + name;
}

// An .npy file's bytes: magic, version, header length (2 bytes for 1.x, else 4), header, data.
std::string npy_bytes(const std::string& header, const std::string& data, int major = 1) {
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  const size_t n = header.size();
  out.push_back(static_cast<char>(n & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  if (major != 1) out.append(2, '\0');
  return out + header + data;
}

std::string f32_bytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

Tensor parse(const std::string& bytes) {
  return parse_npy(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), "t.npy");
}

std::string parse_error(const std::string& bytes) {
  return error_of<FormatError>([&] { parse(bytes); });
}

const std::string f4_header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";

// --- files numpy wrote --------------------------------------------------------------------------

TEST(NpyRead, Float32MatrixWrittenByNumpy) {
  Tensor t = read_npy(fixture("f4_2x3.npy"));
  EXPECT_EQ(t.element_type(), ElementType::f32);
  EXPECT_EQ(t.shape(), Shape({2, 3}));
  EXPECT_THAT(t.to_vector<float>(), ElementsAre(-1.f, -0.5f, 0.f, 0.5f, 1.f, 1.5f));
}

TEST(NpyRead, Int64BoolAndHalfWrittenByNumpy) {
  Tensor i = read_npy(fixture("i8_3.npy"));
  EXPECT_EQ(i.element_type(), ElementType::i64);
  EXPECT_THAT(i.to_vector<int64_t>(), ElementsAre(-1, 0, int64_t{1} << 40));

  Tensor b = read_npy(fixture("b1_4.npy"));
  EXPECT_EQ(b.element_type(), ElementType::boolean);
  EXPECT_EQ(b.shape(), Shape({4}));
  EXPECT_THAT(b.to_vector<bool>(), ElementsAre(true, false, false, true));

  Tensor h = read_npy(fixture("f2_3.npy"));
  EXPECT_EQ(h.element_type(), ElementType::f16);
  EXPECT_EQ(h.value_at(0), 1.0);
  EXPECT_EQ(h.value_at(1), -2.5);
  EXPECT_EQ(h.value_at(2), 65504.0);  // the largest half
}

TEST(NpyRead, Version2And3HeadersWrittenByNumpy) {
  Tensor u = read_npy(fixture("u1_2x2_v2.npy"));
  EXPECT_EQ(u.element_type(), ElementType::u8);
  EXPECT_EQ(u.shape(), Shape({2, 2}));
  EXPECT_THAT(u.to_vector<uint8_t>(), ElementsAre(1, 2, 3, 254));

  Tensor s = read_npy(fixture("i4_scalar_v3.npy"));
  EXPECT_EQ(s.element_type(), ElementType::i32);
  EXPECT_EQ(s.shape().rank(), 0u);
  EXPECT_THAT(s.to_vector<int32_t>(), ElementsAre(-7));
}

TEST(NpyRead, ZeroSizedArrayWrittenByNumpy) {
  Tensor t = read_npy(fixture("f8_0x3.npy"));
  EXPECT_EQ(t.element_type(), ElementType::f64);
  EXPECT_EQ(t.shape(), Shape({0, 3}));
  EXPECT_EQ(t.size(), 0);
}

TEST(NpyRead, RefusesFortranOrderBigEndianAndUnsupportedDtypesNumpyWrote) {
  const std::string fortran = fixture("f4_fortran.npy");
  EXPECT_THAT(error_of<FormatError>([&] { read_npy(fortran); }),
              AllOf(HasSubstr(fortran), HasSubstr("Fortran-order"), HasSubstr("[2,3]")));
  const std::string big = fixture("f4_big_endian.npy");
  EXPECT_THAT(error_of<FormatError>([&] { read_npy(big); }),
              AllOf(HasSubstr(big), HasSubstr("big-endian dtype '>f4'")));
  const std::string c8 = fixture("c8_unsupported.npy");
  EXPECT_THAT(error_of<FormatError>([&] { read_npy(c8); }),
              AllOf(HasSubstr(c8), HasSubstr("unsupported dtype '<c8'")));
}

TEST(NpyRead, Uint16WrittenByNumpy) {
  Tensor t = read_npy(fixture("u2_3.npy"));
  EXPECT_EQ(t.element_type(), ElementType::u16);
  EXPECT_THAT(t.to_vector<uint16_t>(), ElementsAre(0, 1, 2));
}

// --- headers built here
// ---------------------------------------------------------------------------

TEST(NpyRead, AcceptsHeaderVariantsPythonWrites) {
  // Double quotes, no trailing comma, no padding, Python 2 long dims, keys in another order.
  Tensor t = parse(npy_bytes("{\"shape\": (1L, 2L), \"fortran_order\": False, \"descr\": \"<f4\"}",
                             f32_bytes({3.f, 4.f})));
  EXPECT_EQ(t.shape(), Shape({1, 2}));
  EXPECT_THAT(t.to_vector<float>(), ElementsAre(3.f, 4.f));
  // '|' and '=' byte orders, and a byte-order-free one-byte type written with '>'.
  EXPECT_EQ(
      parse(npy_bytes("{'descr': '=f4', 'fortran_order': False, 'shape': (1,)}", f32_bytes({1.f})))
          .element_type(),
      ElementType::f32);
  EXPECT_THAT(parse(npy_bytes("{'descr': '>i1', 'fortran_order': False, 'shape': (2,)}",
                              std::string("\xff\x05", 2)))
                  .to_vector<int8_t>(),
              ElementsAre(-1, 5));
  // Non-zero bytes of a b1 array other writers may leave are read as true.
  EXPECT_THAT(parse(npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (3,)}",
                              std::string("\x00\x02\x01", 3)))
                  .to_vector<bool>(),
              ElementsAre(false, true, true));
  // A version 2.0 header built by hand (4-byte length).
  EXPECT_THAT(parse(npy_bytes(f4_header, f32_bytes({5.f, 6.f}), 2)).to_vector<float>(),
              ElementsAre(5.f, 6.f));
}

TEST(NpyRead, NotAnNpyFile) {
  EXPECT_THAT(parse_error(""), AllOf(HasSubstr("'t.npy'"), HasSubstr("it is empty")));
  EXPECT_THAT(parse_error("PK\x03\x04 zip data"),
              AllOf(HasSubstr("not an .npy file"), HasSubstr("0x504b0304207a")));
  EXPECT_THAT(parse_error("\x93NUM"), HasSubstr("not an .npy file"));
}

TEST(NpyRead, UnsupportedVersions) {
  std::string v4 = npy_bytes(f4_header, f32_bytes({1.f, 2.f}));
  v4[6] = 4;
  EXPECT_THAT(parse_error(v4), HasSubstr("unsupported .npy format version 4.0"));
  std::string v1_1 = npy_bytes(f4_header, f32_bytes({1.f, 2.f}));
  v1_1[7] = 1;
  EXPECT_THAT(parse_error(v1_1), HasSubstr("version 1.1"));
}

TEST(NpyRead, TruncatedAnywhere) {
  const std::string good = npy_bytes(f4_header, f32_bytes({1.f, 2.f}));
  ASSERT_EQ(parse(good).size(), 2);
  EXPECT_THAT(parse_error(good.substr(0, 7)), HasSubstr("inside the version bytes"));
  EXPECT_THAT(parse_error(good.substr(0, 9)), HasSubstr("inside the header length"));
  EXPECT_THAT(parse_error(good.substr(0, 30)),
              HasSubstr("the header is " + std::to_string(f4_header.size()) +
                        " bytes long but only 20 follow"));
  EXPECT_THAT(parse_error(good.substr(0, good.size() - 3)),
              HasSubstr("shape [2] of '<f4' needs 8 bytes of data, the file has 5"));
  EXPECT_THAT(parse_error(good + "xy"), HasSubstr("2 unexpected bytes after the 8 bytes of data"));
  // Every prefix is refused with a FormatError, never read past its end.
  for (size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(parse_error(good.substr(0, n)).empty());
}

TEST(NpyRead, MalformedHeaders) {
  auto header_error = [](const std::string& header) {
    return parse_error(npy_bytes(header, f32_bytes({1.f, 2.f})));
  };
  EXPECT_THAT(header_error("descr: <f4"),
              AllOf(HasSubstr("malformed .npy header: expected '{'"), HasSubstr("\"descr: <f4\"")));
  EXPECT_THAT(header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)"),
              HasSubstr("expected ',' or '}'"));
  EXPECT_THAT(header_error("{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}"),
              HasSubstr("expected ':'"));
  EXPECT_THAT(header_error("{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}"),
              HasSubstr("expected a string, True, False or a tuple"));
  EXPECT_THAT(header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}"),
              HasSubstr("negative dimension"));
  EXPECT_THAT(header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}"),
              HasSubstr("expected ',' or ')' in the shape"));
  EXPECT_THAT(
      header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}"),
      HasSubstr("dimension too large"));
  EXPECT_THAT(header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk"),
              HasSubstr("unexpected text after the dict"));
  EXPECT_THAT(header_error("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False}"),
              HasSubstr("key 'descr' appears twice"));
  EXPECT_THAT(header_error("{'descr': '<f4', 'fortran_order': False}"), HasSubstr("no 'shape'"));
  EXPECT_THAT(header_error("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}"),
              HasSubstr("expected a string, True, False or a tuple"));
  EXPECT_THAT(header_error("{'descr': '<f4', 'fortran_order': 'no', 'shape': (2,)}"),
              HasSubstr("'fortran_order' is not True or False"));
  EXPECT_THAT(header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': True}"),
              HasSubstr("unexpected key 'x'"));
  EXPECT_THAT(header_error("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}"),
              HasSubstr("structured dtype"));
  EXPECT_THAT(header_error("{'descr': 'it\\'s', 'fortran_order': False, 'shape': (2,)}"),
              HasSubstr("escape sequences"));
  EXPECT_THAT(header_error("{'descr': '<f4"), HasSubstr("unterminated string"));
  // Bytes that are not text are shown escaped.
  EXPECT_THAT(header_error(std::string("\x01\xff{", 3)), HasSubstr("\"\\x01\\xff{\""));
}

TEST(NpyRead, UnsupportedDtypes) {
  for (const char* descr : {"<c8", "<f16", "<U3", "|O", "<M8[s]", "|V4", "f"}) {
    const std::string header =
        std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (2,)}";
    EXPECT_THAT(parse_error(npy_bytes(header, f32_bytes({1.f, 2.f}))),
                HasSubstr(std::string("unsupported dtype '") + descr + "'"))
        << descr;
  }
  EXPECT_THAT(parse_error(npy_bytes("{'descr': '>i8', 'fortran_order': False, 'shape': (1,)}",
                                    std::string(8, '\0'))),
              HasSubstr("big-endian dtype '>i8'"));
}

TEST(NpyRead, ShapeWhoseSizeOverflows) {
  EXPECT_THAT(parse_error(npy_bytes("{'descr': '<f8', 'fortran_order': False, "
                                    "'shape': (4294967296, 4294967296)}",
                                    "")),
              HasSubstr("is too large"));
}

TEST(NpyRead, MissingFileAndDirectoryAreNamed) {
  test::TempDir dir("npy");
  const std::string missing = dir.file("missing.npy");
  EXPECT_THAT(error_of<InvalidArgument>([&] { read_npy(missing); }),
              AllOf(HasSubstr(missing), HasSubstr("cannot open")));
  EXPECT_THAT(error_of<InvalidArgument>([&] { read_npy(dir.path().string()); }),
              HasSubstr("is a directory"));
}

// --- writing
// ---------------------------------------------------------------------------------------

TEST(NpyWrite, HeaderIsWhatNumpyWritesAndDataIsAligned) {
  const std::string bytes = to_npy_bytes(Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  ASSERT_EQ(bytes.size(), 128u + 24u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8, 118);
  const std::string header = bytes.substr(10, 118);
  EXPECT_EQ(header.substr(0, 59), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(header.find_first_not_of(' ', 59), 117u);  // spaces up to the final newline
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(bytes.substr(128), f32_bytes({1, 2, 3, 4, 5, 6}));

  EXPECT_THAT(to_npy_bytes(Tensor::from_vector<uint8_t>({}, {9})),
              HasSubstr("{'descr': '|u1', 'fortran_order': False, 'shape': (), }"));
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(NpyWrite, SameBytesAsNumpyForItsOwnFiles) {
  // For these shapes numpy's padding (room for the shape to grow, then 64-byte alignment) lands
  // on the same 128-byte preamble as troupe's, so the files must be identical.
  for (const char* name : {"f4_2x3.npy", "i8_3.npy", "b1_4.npy", "f2_3.npy"}) {
    const std::string numpy_bytes = file_bytes(fixture(name));
    ASSERT_FALSE(numpy_bytes.empty()) << name;
    EXPECT_EQ(to_npy_bytes(read_npy(fixture(name))), numpy_bytes) << name;
  }
}

TEST(NpyWrite, EveryElementTypeRoundTrips) {
  test::TempDir dir("npy");
  const std::vector<Tensor> tensors = {
      Tensor::from_vector<float>({2, 2}, {1.5f, -2.f, 0.f, 3.25f}),
      Tensor::from_vector<double>({3}, {1e300, -0.5, 7}),
      Tensor::from_vector<float16>({2}, {float16(0.5f), float16(-8.f)}),
      Tensor::from_vector<int8_t>({1, 3}, {-128, 0, 127}),
      Tensor::from_vector<uint8_t>({2, 1}, {0, 255}),
      Tensor::from_vector<int32_t>({2}, {-2147483647 - 1, 2147483647}),
      Tensor::from_vector<int64_t>({1, 1, 2}, {-(int64_t{1} << 62), 42}),
      Tensor::from_vector<bool>({3}, {true, false, true}),
      Tensor::from_vector<int16_t>({2}, {-32768, 32767}),
      Tensor::from_vector<uint16_t>({2}, {0, 65535}),
      Tensor::from_vector<uint32_t>({2}, {4294967295u, 1}),
      Tensor::from_vector<uint64_t>({2}, {18446744073709551615ull, uint64_t{1} << 63}),
      Tensor::from_vector<float>({}, {2.5f}),
      Tensor(ElementType::f32, Shape{0, 4}),
  };
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string path = dir.file("t" + std::to_string(i) + ".npy");
    write_npy(tensors[i], path);
    Tensor back = read_npy(path);
    EXPECT_EQ(back.element_type(), tensors[i].element_type()) << i;
    EXPECT_EQ(back.shape(), tensors[i].shape()) << i;
    ASSERT_EQ(back.byte_size(), tensors[i].byte_size()) << i;
    for (int64_t k = 0; k < back.size(); ++k)
      EXPECT_EQ(back.value_at(k), tensors[i].value_at(k)) << i << "[" << k << "]";
    // Bit-exact too: value_at's double cannot tell u64 values near 2^64 apart.
    EXPECT_EQ(std::memcmp(back.raw_data(), tensors[i].contiguous().raw_data(), back.byte_size()), 0)
        << i;
  }
  EXPECT_THAT(to_npy_bytes(Tensor::from_vector<uint64_t>({1}, {1})), HasSubstr("'descr': '<u8'"));
  EXPECT_THAT(to_npy_bytes(Tensor::from_vector<int16_t>({1}, {1})), HasSubstr("'descr': '<i2'"));
}

TEST(NpyWrite, StridedTensorIsWrittenDense) {
  // Column 1 of a 3x2 buffer: strides of 8 bytes between rows.
  std::vector<float> buffer = {1, 10, 2, 20, 3, 30};
  Tensor column(ElementType::f32, Shape{3}, buffer.data() + 1, {8});
  EXPECT_THAT(parse(to_npy_bytes(column)).to_vector<float>(), ElementsAre(10.f, 20.f, 30.f));
}

TEST(NpyWrite, RefusalsNameTheProblem) {
  EXPECT_THAT(error_of<InvalidArgument>([] { to_npy_bytes(Tensor()); }), HasSubstr("empty tensor"));
  EXPECT_THAT(error_of<InvalidArgument>([] { to_npy_bytes(Tensor(ElementType::bf16, Shape{2})); }),
              HasSubstr("cannot write a bf16 tensor as .npy"));
  EXPECT_THAT(error_of<InvalidArgument>([] {
                write_npy(Tensor::from_vector<float>({1}, {1.f}), "/nonexistent_dir_troupe/x.npy");
              }),
              HasSubstr("/nonexistent_dir_troupe/x.npy"));
}

}  // namespace
}  // namespace troupe
