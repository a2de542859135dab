#include "troupe/shape.hpp"

#include <algorithm>

#include "troupe/error.hpp"

namespace troupe {

bool Shape::is_static() const {
  for (int64_t d : dims_)
    if (d < 0) return false;
  return true;
}

int64_t Shape::element_count() const {
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d < 0) throw InvalidArgument("element_count of dynamic shape " + to_string());
    // A shape read from a file may multiply past int64 (and wrap to a small count).
    if (__builtin_mul_overflow(n, d, &n))
      throw InvalidArgument("shape " + to_string() + " has more elements than int64 can count");
  }
  return n;
}

bool Shape::accepts(const Shape& concrete) const {
  if (concrete.rank() != rank()) return false;
  for (size_t i = 0; i < rank(); ++i)
    if (dims_[i] >= 0 && dims_[i] != concrete[i]) return false;
  return true;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ",";
    s += dims_[i] < 0 ? "?" : std::to_string(dims_[i]);
  }
  return s + "]";
}

std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.rank(), 1);
  // With a zero dimension the element count is 0, yet the strides of the other dimensions can
  // still overflow (an .npy shape (0, 2^40, 2^40) did).
  for (size_t i = shape.rank(); i-- > 1;)
    if (__builtin_mul_overflow(strides[i], std::max<int64_t>(shape[i], 1), &strides[i - 1]))
      throw InvalidArgument("the strides of shape " + shape.to_string() + " overflow int64");
  return strides;
}

}  // namespace troupe
