#include "serialization/npy_format.hpp"

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <ostream>
#include <vector>

#include "serialization/byte_io.hpp"
#include "serialization/file_io.hpp"
#include "troupe/error.hpp"

// The elements are copied as they are between the file and the tensor, which is right only on a
// little-endian host (every CPU troupe targets).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npy_format assumes a little-endian host");

namespace troupe::serialization {

namespace {

constexpr unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr size_t npy_alignment = 64;

[[noreturn]] void fail(const std::string& source, const std::string& problem) {
  throw FormatError("'" + source + "': " + problem);
}

// The header as it can be shown in an error: printable ASCII kept, the rest escaped, long ones cut.
std::string quote_header(const std::string& header) {
  std::string out;
  for (size_t i = 0; i < header.size() && i < 120; ++i) {
    const auto c = static_cast<unsigned char>(header[i]);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      static const char* digits = "0123456789abcdef";
      out += c == '\n' ? std::string("\\n") : std::string("\\x") + digits[c >> 4] + digits[c & 15];
    }
  }
  if (header.size() > 120) out += "...";
  return "\"" + out + "\"";
}

struct HeaderValue {
  enum class Kind { string, boolean, tuple } kind = Kind::string;
  std::string text;
  bool flag = false;
  std::vector<int64_t> dims;
};

// A recursive-descent reader of the one kind of Python literal np.save writes: a dict of string
// keys whose values are strings, True/False or tuples of non-negative ints.
class HeaderParser {
 public:
  HeaderParser(const std::string& header, const std::string& source)
      : s_(header), source_(source) {}

  std::map<std::string, HeaderValue> parse_dict() {
    std::map<std::string, HeaderValue> dict;
    skip_space();
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      const size_t key_at = pos_;
      const std::string key = parse_string();
      if (dict.count(key)) error("key '" + key + "' appears twice", key_at);
      skip_space();
      expect(':');
      skip_space();
      dict[key] = parse_value();
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') error("expected ',' or '}'", pos_);
    }
    ++pos_;
    skip_space();
    if (pos_ != s_.size()) error("unexpected text after the dict", pos_);
    return dict;
  }

 private:
  [[noreturn]] void error(const std::string& what, size_t at) const {
    fail(source_, "malformed .npy header: " + what + " at character " + std::to_string(at) +
                      " of " + quote_header(s_));
  }

  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }

  void expect(char c) {
    if (peek() != c) error(std::string("expected '") + c + "'", pos_);
    ++pos_;
  }

  void skip_space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  bool consume_word(const char* word) {
    const size_t n = std::strlen(word);
    if (s_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }

  std::string parse_string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') error("expected a quoted string", pos_);
    const size_t start = ++pos_;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\') error("escape sequences are not supported", pos_);
      ++pos_;
    }
    if (pos_ == s_.size()) error("unterminated string", start - 1);
    return s_.substr(start, pos_++ - start);
  }

  HeaderValue parse_value() {
    HeaderValue v;
    const char c = peek();
    if (c == '\'' || c == '"') {
      v.kind = HeaderValue::Kind::string;
      v.text = parse_string();
    } else if (consume_word("True")) {
      v.kind = HeaderValue::Kind::boolean;
      v.flag = true;
    } else if (consume_word("False")) {
      v.kind = HeaderValue::Kind::boolean;
      v.flag = false;
    } else if (c == '(') {
      v.kind = HeaderValue::Kind::tuple;
      v.dims = parse_tuple();
    } else if (c == '[') {
      error("a list value (a structured dtype?) is not supported", pos_);
    } else {
      error("expected a string, True, False or a tuple", pos_);
    }
    return v;
  }

  std::vector<int64_t> parse_tuple() {
    std::vector<int64_t> dims;
    expect('(');
    for (;;) {
      skip_space();
      if (peek() == ')') break;
      dims.push_back(parse_dimension());
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ')') error("expected ',' or ')' in the shape", pos_);
    }
    ++pos_;
    return dims;
  }

  int64_t parse_dimension() {
    if (peek() == '-') error("negative dimension", pos_);
    if (peek() < '0' || peek() > '9') error("expected a dimension", pos_);
    int64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      const int digit = peek() - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10)
        error("dimension too large", pos_);
      value = value * 10 + digit;
      ++pos_;
    }
    if (peek() == 'L') ++pos_;  // Python 2's long literal, in files written by old numpy
    return value;
  }

  const std::string& s_;
  const std::string& source_;
  size_t pos_ = 0;
};

// '<f4' -> f32 and so on; throws naming the dtype when troupe has no element type for it.
ElementType element_type_of_descr(const std::string& descr, const std::string& source) {
  std::string code = descr;
  char order = '=';
  if (!code.empty() && (code[0] == '<' || code[0] == '>' || code[0] == '|' || code[0] == '=')) {
    order = code[0];
    code = code.substr(1);
  }
  static const std::map<std::string, ElementType> types = {
      {"f2", ElementType::f16}, {"f4", ElementType::f32},     {"f8", ElementType::f64},
      {"i1", ElementType::i8},  {"u1", ElementType::u8},      {"i4", ElementType::i32},
      {"i8", ElementType::i64}, {"b1", ElementType::boolean}, {"i2", ElementType::i16},
      {"u2", ElementType::u16}, {"u4", ElementType::u32},     {"u8", ElementType::u64}};
  auto it = types.find(code);
  if (it == types.end())
    fail(source, "unsupported dtype '" + descr +
                     "' (troupe reads f2, f4, f8, i1, u1, i2, u2, i4, u4, i8, u8 and b1, "
                     "little-endian)");
  if (order == '>' && element_size(it->second) > 1)
    fail(source, "big-endian dtype '" + descr +
                     "' is not supported (save it little-endian, e.g. "
                     "a.astype('<" +
                     code + "'))");
  return it->second;
}

std::string descr_of(ElementType type) {
  switch (type) {
    case ElementType::f16:
      return "<f2";
    case ElementType::f32:
      return "<f4";
    case ElementType::f64:
      return "<f8";
    case ElementType::i8:
      return "|i1";
    case ElementType::u8:
      return "|u1";
    case ElementType::i32:
      return "<i4";
    case ElementType::i64:
      return "<i8";
    case ElementType::i16:
      return "<i2";
    case ElementType::u16:
      return "<u2";
    case ElementType::u32:
      return "<u4";
    case ElementType::u64:
      return "<u8";
    case ElementType::boolean:
      return "|b1";
    default:
      throw InvalidArgument("cannot write a " + std::string(to_string(type)) +
                            " tensor as .npy: NumPy has no such dtype");
  }
}

std::string shape_literal(const std::vector<int64_t>& dims) {
  std::string out = "(";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + (dims.size() == 1 ? ",)" : ")");
}

}  // namespace

Tensor parse_npy(const unsigned char* data, size_t size, const std::string& source) {
  if (size == 0) fail(source, "not an .npy file: it is empty");
  if (size < sizeof(npy_magic) || std::memcmp(data, npy_magic, sizeof(npy_magic)) != 0)
    fail(source, "not an .npy file: it starts with " +
                     describe_magic(data, std::min<size_t>(size, sizeof(npy_magic))) +
                     ", not \"\\x93NUMPY\"");
  if (size < 8) fail(source, "truncated .npy file: it ends inside the version bytes");
  const unsigned major = data[6];
  const unsigned minor = data[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail(source, "unsupported .npy format version " + std::to_string(major) + "." +
                     std::to_string(minor) + " (troupe reads 1.0, 2.0 and 3.0)");
  const size_t length_bytes = major == 1 ? 2 : 4;
  const size_t preamble = 8 + length_bytes;
  if (size < preamble) fail(source, "truncated .npy file: it ends inside the header length");
  const uint64_t header_length = get_le(data + 8, length_bytes);
  if (header_length > size - preamble)
    fail(source, "truncated .npy file: the header is " + std::to_string(header_length) +
                     " bytes long but only " + std::to_string(size - preamble) + " follow");
  const std::string header(reinterpret_cast<const char*>(data + preamble), header_length);

  const auto dict = HeaderParser(header, source).parse_dict();
  auto field = [&](const char* key, HeaderValue::Kind kind, const char* kind_name) {
    auto it = dict.find(key);
    if (it == dict.end())
      fail(source,
           std::string("malformed .npy header: no '") + key + "' in " + quote_header(header));
    if (it->second.kind != kind)
      fail(source, std::string("malformed .npy header: '") + key + "' is not " + kind_name +
                       " in " + quote_header(header));
    return it->second;
  };
  for (const auto& entry : dict)
    if (entry.first != "descr" && entry.first != "fortran_order" && entry.first != "shape")
      fail(source, "malformed .npy header: unexpected key '" + entry.first + "' in " +
                       quote_header(header));
  const std::string descr = field("descr", HeaderValue::Kind::string, "a string").text;
  const bool fortran_order =
      field("fortran_order", HeaderValue::Kind::boolean, "True or False").flag;
  const std::vector<int64_t> dims = field("shape", HeaderValue::Kind::tuple, "a tuple").dims;

  const ElementType type = element_type_of_descr(descr, source);
  const Shape shape(dims);
  if (fortran_order)
    fail(source,
         "Fortran-order (column-major) arrays are not supported; save the array in C "
         "order (np.ascontiguousarray) (shape " +
             shape.to_string() + ")");

  // `extent`, the product of the non-zero dimensions, is bounded as numpy bounds it: with a zero
  // dimension the array is empty, but its strides still multiply the other dimensions.
  uint64_t count = 1;
  uint64_t extent = element_size(type);
  for (int64_t d : dims) {
    if (d != 0 && extent > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) /
                               static_cast<uint64_t>(d))
      fail(source, "shape " + shape.to_string() + " is too large");
    if (d != 0) extent *= static_cast<uint64_t>(d);
    count *= static_cast<uint64_t>(d);
  }
  const uint64_t data_bytes = count * element_size(type);
  const uint64_t available = size - preamble - header_length;
  if (available < data_bytes)
    fail(source, "truncated .npy file: shape " + shape.to_string() + " of '" + descr + "' needs " +
                     std::to_string(data_bytes) + " bytes of data, the file has " +
                     std::to_string(available));
  if (available > data_bytes)
    fail(source, std::to_string(available - data_bytes) + " unexpected bytes after the " +
                     std::to_string(data_bytes) + " bytes of data of shape " + shape.to_string());

  Tensor tensor(type, shape);
  const unsigned char* elements = data + preamble + header_length;
  if (type == ElementType::boolean) {
    // A bool must hold 0 or 1; numpy writes exactly that, other writers may not.
    auto* out = static_cast<unsigned char*>(tensor.raw_data());
    for (uint64_t i = 0; i < count; ++i) out[i] = elements[i] != 0 ? 1 : 0;
  } else if (data_bytes > 0) {
    std::memcpy(tensor.raw_data(), elements, data_bytes);
  }
  return tensor;
}

Tensor read_npy(const std::string& path) {
  const FileBytes bytes = map_file(path, ".npy file");
  return parse_npy(bytes.data, bytes.size, path);
}

std::string to_npy_bytes(const Tensor& tensor) {
  if (tensor.empty()) throw InvalidArgument("cannot write an empty tensor (no type) as .npy");
  const std::string descr = descr_of(tensor.element_type());
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " +
                       shape_literal(tensor.shape().dims()) + ", }";
  // Pad with spaces so the data starts at a multiple of 64 bytes; the header ends with '\n'.
  const size_t preamble = 10;
  const size_t total = align_up(preamble + header.size() + 1, npy_alignment);
  header.append(total - preamble - header.size() - 1, ' ');
  header.push_back('\n');
  if (header.size() > 0xffff)
    throw InvalidArgument("cannot write shape " + tensor.shape().to_string() +
                          " as .npy 1.0: the header would be too long");

  std::string out(reinterpret_cast<const char*>(npy_magic), sizeof(npy_magic));
  out.push_back(1);
  out.push_back(0);
  put_le(out, header.size(), 2);
  out += header;
  const Tensor dense = tensor.contiguous();
  out.append(static_cast<const char*>(dense.raw_data()), dense.byte_size());
  return out;
}

void write_npy(const Tensor& tensor, const std::string& path) {
  const std::string bytes = to_npy_bytes(tensor);
  write_file_atomically(path, [&](std::ostream& out) {
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  });
}

}  // namespace troupe::serialization
