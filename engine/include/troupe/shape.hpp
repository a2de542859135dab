#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace troupe {

/// A tensor shape. A dimension of -1 is dynamic (known only when a tensor is bound).
class Shape {
 public:
  static constexpr int64_t dynamic = -1;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  size_t rank() const { return dims_.size(); }
  int64_t operator[](size_t i) const { return dims_[i]; }
  int64_t& operator[](size_t i) { return dims_[i]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }

  /// True when no dimension is dynamic.
  bool is_static() const;
  /// Product of the dimensions (1 for a scalar); requires a static shape.
  int64_t element_count() const;
  /// Whether `concrete` (static) fits this shape: same rank, equal where this one is static.
  bool accepts(const Shape& concrete) const;

  /// "[1,3,224,224]", with "?" for dynamic dimensions.
  std::string to_string() const;

  friend bool operator==(const Shape& a, const Shape& b) { return a.dims_ == b.dims_; }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  std::vector<int64_t> dims_;
};

/// Dense row-major strides in elements for a static shape.
std::vector<int64_t> row_major_strides(const Shape& shape);

}  // namespace troupe
