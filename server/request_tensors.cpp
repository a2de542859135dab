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
                         "UINT64, INT64, FP16, BF16, FP32, FP64)");
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

Tensor tensor_from_bytes(const std::string& tensor, ElementType type, const Shape& shape,
                         const void* data, size_t bytes) {
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
