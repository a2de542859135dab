#include "troupe/tensor.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "engine/ir/element_dispatch.hpp"

namespace troupe {

namespace {

std::shared_ptr<void> allocate(size_t bytes) {
  constexpr size_t alignment = 64;
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* p = std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded == 0 ? alignment : rounded);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

// String elements are objects: constructed empty here, destroyed with the last copy.
std::shared_ptr<void> allocate_strings(int64_t count) {
  constexpr size_t alignment = 64;
  const size_t bytes = static_cast<size_t>(count) * sizeof(std::string);
  const size_t rounded = std::max(alignment, (bytes + alignment - 1) / alignment * alignment);
  void* p = std::aligned_alloc(alignment, rounded);
  if (!p) throw std::bad_alloc();
  auto* strings = static_cast<std::string*>(p);
  for (int64_t i = 0; i < count; ++i) new (strings + i) std::string();
  return std::shared_ptr<void>(p, [count](void* q) {
    auto* s = static_cast<std::string*>(q);
    for (int64_t i = 0; i < count; ++i) s[i].~basic_string();
    std::free(q);
  });
}

std::vector<int64_t> dense_byte_strides(const Shape& shape, ElementType type) {
  auto strides = row_major_strides(shape);
  for (auto& s : strides)
    if (__builtin_mul_overflow(s, static_cast<int64_t>(element_size(type)), &s))
      throw InvalidArgument("the byte strides of shape " + shape.to_string() + " overflow int64");
  return strides;
}

// Walks every element of `shape` in row-major order, calling run(src_offset, dst_offset, count)
// for each innermost row (offsets in bytes).
template <class Run>
void for_each_row(const Shape& shape, const std::vector<int64_t>& src_strides,
                  const std::vector<int64_t>& dst_strides, Run&& run) {
  const size_t rank = shape.rank();
  if (rank == 0) {
    run(0, 0, 1);
    return;
  }
  for (int64_t d : shape)
    if (d == 0) return;
  const int64_t inner = shape[rank - 1];
  std::vector<int64_t> index(rank, 0);
  while (true) {
    int64_t so = 0, doff = 0;
    for (size_t i = 0; i + 1 < rank; ++i) {
      so += index[i] * src_strides[i];
      doff += index[i] * dst_strides[i];
    }
    run(so, doff, inner);
    // advance the outer index (all but the innermost dimension)
    size_t dim = rank - 1;
    while (dim > 0) {
      --dim;
      if (++index[dim] < shape[dim]) break;
      index[dim] = 0;
      if (dim == 0) return;
    }
    if (rank == 1) return;
  }
}

}  // namespace

Tensor::Tensor(ElementType type, const Shape& shape) : type_(type), shape_(shape) {
  if (type == ElementType::undefined)
    throw InvalidArgument("cannot allocate a tensor of undefined element type");
  if (!shape.is_static())
    throw InvalidArgument("cannot allocate a tensor of dynamic shape " + shape.to_string());
  size_ = shape.element_count();
  strides_ = dense_byte_strides(shape, type);
  storage_ = type == ElementType::string ? allocate_strings(size_) : allocate(byte_size());
  data_ = storage_.get();
}

Tensor::Tensor(ElementType type, const Shape& shape, void* data, std::vector<int64_t> byte_strides)
    : type_(type), shape_(shape), data_(data) {
  if (type == ElementType::undefined)
    throw InvalidArgument("cannot wrap memory as a tensor of undefined element type");
  if (!shape.is_static())
    throw InvalidArgument("cannot wrap memory with dynamic shape " + shape.to_string());
  if (!data && shape.element_count() != 0)
    throw InvalidArgument("cannot wrap a null pointer as a tensor of shape " + shape.to_string());
  size_ = shape.element_count();
  if (byte_strides.empty()) {
    strides_ = dense_byte_strides(shape, type);
  } else {
    if (byte_strides.size() != shape.rank())
      throw InvalidArgument("tensor of rank " + std::to_string(shape.rank()) + " given " +
                            std::to_string(byte_strides.size()) + " strides");
    const auto esize = static_cast<int64_t>(element_size(type));
    for (int64_t s : byte_strides)
      if (s % esize != 0)
        throw InvalidArgument("stride " + std::to_string(s) + " is not a multiple of the " +
                              std::string(to_string(type)) + " element size");
    strides_ = std::move(byte_strides);
  }
}

Tensor::Tensor(ElementType type, const Shape& shape, std::shared_ptr<void> owner, void* data)
    : Tensor(type, shape, data) {
  storage_ = std::move(owner);
}

bool Tensor::is_contiguous() const {
  // Called per tensor on every request's path: compare with the dense strides without building
  // them.
  if (size_ <= 1) return true;
  int64_t expected = static_cast<int64_t>(element_size(type_));
  for (size_t i = shape_.rank(); i-- > 0;) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

void Tensor::check_type(ElementType requested) const {
  if (requested != type_)
    throw TensorMismatch("tensor holds " + std::string(to_string(type_)) + ", accessed as " +
                         std::string(to_string(requested)));
}

Tensor Tensor::contiguous() const {
  if (empty() || is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  if (empty()) return {};
  Tensor copy(type_, shape_);
  copy_to(copy);
  return copy;
}

void Tensor::copy_to(Tensor& dst) const {
  if (dst.shape_ != shape_)
    throw TensorMismatch("copy of shape " + shape_.to_string() + " into shape " +
                         dst.shape_.to_string());
  if (!is_convertible(type_, dst.type_))
    throw TensorMismatch("cannot convert " + std::string(to_string(type_)) + " to " +
                         std::string(to_string(dst.type_)));
  const auto* src_base = static_cast<const char*>(data_);
  auto* dst_base = static_cast<char*>(dst.data_);
  const int64_t src_inner = shape_.rank() ? strides_.back() : 0;
  const int64_t dst_inner = shape_.rank() ? dst.strides_.back() : 0;
  if (type_ == ElementType::string) {  // objects: assigned, never copied as bytes
    if (data_ == dst.data_ && strides_ == dst.strides_) return;
    for_each_row(shape_, strides_, dst.strides_, [&](int64_t so, int64_t doff, int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<std::string*>(dst_base + doff + i * dst_inner) =
            *reinterpret_cast<const std::string*>(src_base + so + i * src_inner);
    });
    return;
  }
  if (type_ == dst.type_ && is_contiguous() && dst.is_contiguous()) {
    if (byte_size()) std::memmove(dst.data_, data_, byte_size());
    return;
  }
  dispatch_element_type(type_, [&](auto src_tag) {
    using S = typename decltype(src_tag)::type;
    dispatch_element_type(dst.type_, [&](auto dst_tag) {
      using D = typename decltype(dst_tag)::type;
      for_each_row(shape_, strides_, dst.strides_, [&](int64_t so, int64_t doff, int64_t n) {
        const char* s = src_base + so;
        char* d = dst_base + doff;
        for (int64_t i = 0; i < n; ++i) {
          S v;
          std::memcpy(&v, s + i * src_inner, sizeof(S));
          D out = convert_value<D>(v);
          std::memcpy(d + i * dst_inner, &out, sizeof(D));
        }
      });
    });
  });
}

Tensor Tensor::convert(ElementType type) const {
  Tensor out(type, shape_);
  copy_to(out);
  return out;
}

Tensor Tensor::reshaped(const Shape& shape) const {
  if (!is_contiguous())
    throw TensorMismatch("reshape of a strided tensor of shape " + shape_.to_string());
  if (!shape.is_static() || shape.element_count() != size_)
    throw TensorMismatch("cannot reshape " + shape_.to_string() + " to " + shape.to_string());
  Tensor t = *this;
  t.shape_ = shape;
  t.strides_ = dense_byte_strides(shape, type_);
  return t;
}

double Tensor::value_at(int64_t flat_index) const {
  if (flat_index < 0 || flat_index >= size_)
    throw InvalidArgument("element index " + std::to_string(flat_index) + " out of range for " +
                          shape_.to_string());
  int64_t offset = 0;
  int64_t rest = flat_index;
  for (size_t i = shape_.rank(); i-- > 0;) {
    offset += (rest % shape_[i]) * strides_[i];
    rest /= shape_[i];
  }
  const char* p = static_cast<const char*>(data_) + offset;
  if (type_ == ElementType::string)
    throw TensorMismatch("element " + std::to_string(flat_index) +
                         " of a string tensor has no numeric value");
  return dispatch_element_type(type_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v;
    std::memcpy(&v, p, sizeof(T));
    return to_double(v);
  });
}

}  // namespace troupe
