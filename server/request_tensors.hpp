#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "server/server_context.hpp"
#include "troupe/actor_protocol.hpp"
#include "troupe/tensor.hpp"

namespace troupe::server {

/// The element type of a request tensor's `datatype`; ServeError(bad_request) naming the tensor
/// for an unknown or unsupported name.
ElementType request_element_type(const std::string& tensor, const std::string& datatype);

/// The shape of a request tensor, checked: no negative dimension, the element count neither
/// overflows nor exceeds the limit. Throws ServeError(bad_request) naming the tensor.
Shape request_shape(const std::string& tensor, const std::vector<int64_t>& dims,
                    const ServerLimits& limits);

/// A tensor copied from raw little-endian bytes (binary extension, gRPC raw contents); the byte
/// count must be exactly elements x element size, or for BYTES the elements, each a 4-byte
/// little-endian length and its bytes, and nothing after them.
Tensor tensor_from_bytes(const std::string& tensor, ElementType type, const Shape& shape,
                         const void* data, size_t bytes);

/// The raw form of an output (binary extension, gRPC raw contents): its little-endian bytes, or
/// for strings each one's 4-byte little-endian length and bytes.
std::string tensor_bytes(const Tensor& tensor);

/// Checks each requested output exists (ServeError(bad_request) naming an unknown one) and keeps
/// only those (all when `requested` is empty).
NamedTensors select_outputs(NamedTensors outputs, const std::vector<std::string>& requested,
                            const std::string& model);

}  // namespace troupe::server
