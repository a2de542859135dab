#include "server/request_tensors.hpp"

#include <cstring>
#include <limits>

#include "server/datatype.hpp"
#include "server/serve_error.hpp"

namespace troupe::server {

ElementType request_element_type(const std::string& tensor, const std::string& datatype) {
  auto type = element_type_of_datatype(datatype);
  if (!type)
    throw ServeError(ServeErrc::bad_request,
                     "input '" + tensor + "': datatype '" + datatype +
                         "' is not supported (BOOL, UINT8, INT8, UINT16, INT16, UINT32, INT32, "
                         "UINT64, INT64, FP16, BF16, FP32, FP64, BYTES)");
  return *type;
}

Shape request_shape(const std::string& tensor, const std::vector<int64_t>& dims,
                    const ServerLimits& limits) {
  if (dims.size() > 16)
    throw ServeError(ServeErrc::bad_request, "input '" + tensor + "': shape has " +
                                                 std::to_string(dims.size()) +
                                                 " dimensions (at most 16)");
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d < 0)
      throw ServeError(
          ServeErrc::bad_request,
          "input '" + tensor + "': shape has a negative dimension " + std::to_string(d));
    if (d != 0 && elements > limits.max_tensor_elements / d)
      throw ServeError(ServeErrc::bad_request, "input '" + tensor + "': shape has more than " +
                                                   std::to_string(limits.max_tensor_elements) +
                                                   " elements (the limit)");
    elements *= d;
  }
  return Shape(dims);
}

namespace {

// BYTES elements in binary form (the binary extension, gRPC raw contents): each a 4-byte
// little-endian length, then that many bytes.
Tensor strings_from_bytes(const std::string& tensor, const Shape& shape, const void* data,
                          size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  const int64_t count = shape.element_count();
  // Every element costs at least its 4-byte length: checked before allocating.
  if (static_cast<uint64_t>(count) > bytes / 4)
    throw ServeError(ServeErrc::bad_request, "input '" + tensor + "': " + std::to_string(bytes) +
                                                 " bytes of BYTES data " + "cannot hold " +
                                                 std::to_string(count) + " elements (4 bytes of " +
                                                 "length each at least)");
  Tensor t(ElementType::string, shape);
  std::string* out = t.data<std::string>();
  size_t at = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (bytes - at < 4)
      throw ServeError(ServeErrc::bad_request, "input '" + tensor + "': BYTES element " +
                                                   std::to_string(i) + " has no 4-byte length");
    const uint32_t length = static_cast<uint32_t>(p[at]) | static_cast<uint32_t>(p[at + 1]) << 8 |
                            static_cast<uint32_t>(p[at + 2]) << 16 |
                            static_cast<uint32_t>(p[at + 3]) << 24;
    at += 4;
    if (length > bytes - at)
      throw ServeError(ServeErrc::bad_request, "input '" + tensor + "': BYTES element " +
                                                   std::to_string(i) + " is " +
                                                   std::to_string(length) + " bytes long, only " +
                                                   std::to_string(bytes - at) + " bytes follow");
    out[i].assign(reinterpret_cast<const char*>(p + at), length);
    at += length;
  }
  if (at != bytes)
    throw ServeError(ServeErrc::bad_request,
                     "input '" + tensor + "': " + std::to_string(bytes - at) +
                         " bytes follow its " + std::to_string(count) + " BYTES elements");
  return t;
}

}  // namespace

Tensor tensor_from_bytes(const std::string& tensor, ElementType type, const Shape& shape,
                         const void* data, size_t bytes) {
  if (type == ElementType::string) return strings_from_bytes(tensor, shape, data, bytes);
  Tensor t(type, shape);
  if (t.byte_size() != bytes)
    throw ServeError(ServeErrc::bad_request, "input '" + tensor + "': " + std::to_string(bytes) +
                                                 " bytes of data, but " + std::to_string(t.size()) +
                                                 " elements of its datatype need " +
                                                 std::to_string(t.byte_size()));
  if (type == ElementType::boolean) {
    // A bool holding anything but 0 or 1 is undefined behaviour in every kernel that reads it.
    const auto* b = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < bytes; ++i)
      if (b[i] > 1)
        throw ServeError(ServeErrc::bad_request, "input '" + tensor + "': BOOL byte " +
                                                     std::to_string(i) + " is " +
                                                     std::to_string(b[i]) + " (must be 0 or 1)");
  }
  if (bytes) std::memcpy(t.raw_data(), data, bytes);
  return t;
}

std::string tensor_bytes(const Tensor& tensor) {
  const Tensor dense = tensor.contiguous();
  if (dense.element_type() != ElementType::string)
    return std::string(static_cast<const char*>(dense.raw_data()),
                       dense.empty() ? 0 : dense.byte_size());
  std::string out;
  for (const std::string& s : dense.to_vector<std::string>()) {
    const auto length = static_cast<uint32_t>(s.size());
    for (int shift = 0; shift < 32; shift += 8) out += static_cast<char>(length >> shift & 0xFF);
    out += s;
  }
  return out;
}

NamedTensors select_outputs(NamedTensors outputs, const std::vector<std::string>& requested,
                            const std::string& model) {
  if (requested.empty()) return outputs;
  NamedTensors selected;
  for (const auto& name : requested) {
    auto it = outputs.find(name);
    if (it == outputs.end())
      throw ServeError(ServeErrc::bad_request,
                       "model '" + model + "' has no output named '" + name + "'");
    selected.emplace(name, it->second);
  }
  return selected;
}

}  // namespace troupe::server
