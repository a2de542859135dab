#pragma once

#include <string>

#include "troupe/error.hpp"
#include "troupe/model.hpp"

namespace troupe::actors {

/// Throws TensorMismatch naming the tensor when `tensor` cannot stand for the model's `info`
/// (kind is "input" or "output").
inline void check_tensor_fits(const std::string& kind, const ValueInfo& info,
                              const Tensor& tensor) {
  if (tensor.empty()) throw TensorMismatch(kind + " '" + info.name + "' has no tensor bound");
  if (!info.shape.accepts(tensor.shape()))
    throw TensorMismatch(kind + " '" + info.name + "': tensor of shape " +
                         tensor.shape().to_string() + " does not fit the model's shape " +
                         info.shape.to_string());
  const bool ok = kind == "input" ? is_convertible(tensor.element_type(), info.type)
                                  : is_convertible(info.type, tensor.element_type());
  if (!ok)
    throw TensorMismatch(kind + " '" + info.name + "': element type " +
                         std::string(to_string(tensor.element_type())) + " cannot be converted " +
                         (kind == "input" ? "to" : "from") + " the model's " +
                         std::string(to_string(info.type)));
}

/// Makes `buffer` a dense tensor of `type` and `shape`, reallocating only when they differ.
inline void ensure_buffer(Tensor& buffer, ElementType type, const Shape& shape) {
  if (buffer.empty() || buffer.element_type() != type || buffer.shape() != shape)
    buffer = Tensor(type, shape);
}

}  // namespace troupe::actors
