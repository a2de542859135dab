#pragma once

#include <string>

#include "server/grpc/grpc_service.pb.h"
#include "troupe/tensor.hpp"

namespace troupe::server {

/// Whether any field of `contents` holds a value.
bool has_values(const inference::InferTensorContents& contents);

/// An input tensor from its typed contents: the one field its datatype takes (fp32_contents for
/// FP32, int_contents for INT8/INT32, uint_contents for UINT8, ...) with exactly one value per
/// element, each in the datatype's range. FP16 and BF16 have no field and must be sent raw (an
/// empty tensor of them needs no values).
/// Throws ServeError(bad_request) naming the tensor and the field.
Tensor tensor_from_contents(const std::string& tensor, ElementType type, const Shape& shape,
                            const inference::InferTensorContents& contents);

}  // namespace troupe::server
