#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "troupe/element_type.hpp"
#include "troupe/error.hpp"
#include "troupe/shape.hpp"

namespace troupe {

/// An n-dimensional array of one element type. A Tensor either owns its memory (allocated,
/// 64-byte aligned) or wraps memory the caller owns, optionally with byte strides so a region of a
/// larger buffer can be passed without copying. Copies of a Tensor share the same memory.
class Tensor {
 public:
  /// An empty tensor (no type, no memory).
  Tensor() = default;

  /// Allocates a dense, zero-initialized tensor.
  Tensor(ElementType type, const Shape& shape);

  /// Wraps caller-owned memory. `byte_strides` empty means dense row-major; otherwise one stride
  /// per dimension, in bytes, each a multiple of the element size. The memory must outlive every
  /// copy.
  Tensor(ElementType type, const Shape& shape, void* data, std::vector<int64_t> byte_strides = {});

  /// Wraps dense row-major memory kept alive by `owner` (e.g. a memory-mapped weights file):
  /// every copy of the tensor shares `owner`, so the memory lives as long as the last of them.
  Tensor(ElementType type, const Shape& shape, std::shared_ptr<void> owner, void* data);

  /// Makes a dense tensor holding a copy of `values`.
  template <class T>
  static Tensor from_vector(const Shape& shape, const std::vector<T>& values) {
    Tensor t(element_type_of<T>::value, shape);
    if (static_cast<int64_t>(values.size()) != t.size())
      throw InvalidArgument("Tensor::from_vector: " + std::to_string(values.size()) +
                            " values for shape " + shape.to_string());
    std::copy(values.begin(), values.end(), t.data<T>());
    return t;
  }

  ElementType element_type() const { return type_; }
  const Shape& shape() const { return shape_; }
  /// Byte strides, one per dimension.
  const std::vector<int64_t>& strides() const { return strides_; }
  /// Number of elements.
  int64_t size() const { return size_; }
  /// Bytes the elements occupy when dense.
  size_t byte_size() const { return static_cast<size_t>(size_) * element_size(type_); }
  bool empty() const { return type_ == ElementType::undefined; }
  /// True when the strides are dense row-major.
  bool is_contiguous() const;
  /// True when this tensor owns (shares ownership of) its memory.
  bool owns_memory() const { return static_cast<bool>(storage_); }

  void* raw_data() { return data_; }
  const void* raw_data() const { return data_; }

  /// Typed pointer to the first element; throws TensorMismatch if T does not match the type.
  template <class T>
  T* data() {
    check_type(element_type_of<T>::value);
    return static_cast<T*>(data_);
  }
  template <class T>
  const T* data() const {
    check_type(element_type_of<T>::value);
    return static_cast<const T*>(data_);
  }

  /// Copies the elements into a new vector in row-major order (any strides).
  template <class T>
  std::vector<T> to_vector() const {
    Tensor dense = contiguous();
    const T* p = dense.data<T>();
    return std::vector<T>(p, p + size_);
  }

  /// A dense copy if strided, else this tensor itself (shared).
  Tensor contiguous() const;
  /// A dense deep copy.
  Tensor clone() const;
  /// Copies the elements into `dst` (same shape; any strides on either side; element types may
  /// differ when is_convertible allows it).
  void copy_to(Tensor& dst) const;
  /// A new dense tensor of `type` with converted values.
  Tensor convert(ElementType type) const;
  /// Same memory seen with another static shape of equal element count; requires contiguity.
  Tensor reshaped(const Shape& shape) const;

  /// Element i (row-major index, any strides) converted to double; for tests and tools.
  double value_at(int64_t flat_index) const;

 private:
  void check_type(ElementType requested) const;

  ElementType type_ = ElementType::undefined;
  Shape shape_;
  std::vector<int64_t> strides_;
  int64_t size_ = 0;
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
};

}  // namespace troupe
