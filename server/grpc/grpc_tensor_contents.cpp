#include "server/grpc/grpc_tensor_contents.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "server/datatype.hpp"
#include "server/serve_error.hpp"

namespace troupe::server {

namespace {

struct Field {
  const char* name;
  int size;
};

std::array<Field, 8> fields_of(const inference::InferTensorContents& c) {
  return {{{"bool_contents", c.bool_contents_size()},
           {"int_contents", c.int_contents_size()},
           {"int64_contents", c.int64_contents_size()},
           {"uint_contents", c.uint_contents_size()},
           {"uint64_contents", c.uint64_contents_size()},
           {"fp32_contents", c.fp32_contents_size()},
           {"fp64_contents", c.fp64_contents_size()},
           {"bytes_contents", c.bytes_contents_size()}}};
}

// The protocol's field for each datatype troupe accepts (nullptr: raw only).
const char* field_of(ElementType type) {
  switch (type) {
    case ElementType::boolean:
      return "bool_contents";
    case ElementType::i8:
    case ElementType::i16:
    case ElementType::i32:
      return "int_contents";
    case ElementType::i64:
      return "int64_contents";
    case ElementType::u8:
    case ElementType::u16:
    case ElementType::u32:
      return "uint_contents";
    case ElementType::u64:
      return "uint64_contents";
    case ElementType::f32:
      return "fp32_contents";
    case ElementType::f64:
      return "fp64_contents";
    case ElementType::string:
      return "bytes_contents";
    default:
      return nullptr;
  }
}

ServeError bad_input(const std::string& tensor, const std::string& what) {
  return bad_request("input '" + tensor + "': " + what);
}

// Copies `values` into `out`, refusing values a narrower element type cannot hold (INT8, UINT8,
// INT16 and UINT16 travel in 32-bit fields).
template <class To, class Values>
void copy_values(const std::string& tensor, const char* field, const Values& values, To* out) {
  using From = typename Values::value_type;
  constexpr bool narrows =
      std::is_integral_v<To> && !std::is_same_v<To, bool> && sizeof(To) < sizeof(From);
  for (int i = 0; i < values.size(); ++i) {
    const From v = values[i];
    if constexpr (narrows) {
      const auto wide = static_cast<int64_t>(v);
      if (wide < std::numeric_limits<To>::min() || wide > std::numeric_limits<To>::max())
        throw bad_input(tensor, std::string(field) + "[" + std::to_string(i) +
                                    "] = " + std::to_string(wide) + " is out of range for " +
                                    std::string(kserve_datatype(element_type_of<To>::value)));
    }
    out[i] = static_cast<To>(v);
  }
}

}  // namespace

bool has_values(const inference::InferTensorContents& contents) {
  for (const Field& f : fields_of(contents))
    if (f.size > 0) return true;
  return false;
}

Tensor tensor_from_contents(const std::string& tensor, ElementType type, const Shape& shape,
                            const inference::InferTensorContents& contents) {
  const std::string datatype(kserve_datatype(type));
  const char* field = field_of(type);
  if (!field && shape.element_count() == 0 && !has_values(contents)) return Tensor(type, shape);
  if (!field)
    throw bad_input(tensor,
                    "datatype " + datatype +
                        " can only be sent in raw_input_contents (InferTensorContents has no "
                        "16-bit float field)");
  int given = 0;
  for (const Field& f : fields_of(contents)) {
    if (f.name == std::string(field)) {
      given = f.size;
    } else if (f.size > 0) {
      throw bad_input(
          tensor, "datatype " + datatype + " takes its values in " + field + ", not in " + f.name);
    }
  }
  Tensor t(type, shape);
  if (given != t.size())
    throw bad_input(tensor, std::to_string(given) + " values in " + field + ", but shape " +
                                shape.to_string() + " has " + std::to_string(t.size()) +
                                " elements");
  switch (type) {
    case ElementType::boolean:
      copy_values(tensor, field, contents.bool_contents(), t.data<bool>());
      break;
    case ElementType::i8:
      copy_values(tensor, field, contents.int_contents(), t.data<int8_t>());
      break;
    case ElementType::i32:
      copy_values(tensor, field, contents.int_contents(), t.data<int32_t>());
      break;
    case ElementType::i64:
      copy_values(tensor, field, contents.int64_contents(), t.data<int64_t>());
      break;
    case ElementType::u8:
      copy_values(tensor, field, contents.uint_contents(), t.data<uint8_t>());
      break;
    case ElementType::i16:
      copy_values(tensor, field, contents.int_contents(), t.data<int16_t>());
      break;
    case ElementType::u16:
      copy_values(tensor, field, contents.uint_contents(), t.data<uint16_t>());
      break;
    case ElementType::u32:
      copy_values(tensor, field, contents.uint_contents(), t.data<uint32_t>());
      break;
    case ElementType::u64:
      copy_values(tensor, field, contents.uint64_contents(), t.data<uint64_t>());
      break;
    case ElementType::string:
      std::copy(contents.bytes_contents().begin(), contents.bytes_contents().end(),
                t.data<std::string>());
      break;
    case ElementType::f32:
      copy_values(tensor, field, contents.fp32_contents(), t.data<float>());
      break;
    case ElementType::f64:
      copy_values(tensor, field, contents.fp64_contents(), t.data<double>());
      break;
    default:
      break;  // field_of has no field for the others
  }
  return t;
}

}  // namespace troupe::server
