#pragma once

// Helpers shared by the reference kernels: error reporting, axis normalization and reading small
// integer tensors (axes, shapes, pads) given as inputs.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/reference/element_types.hpp"
#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

namespace troupe::kernels::reference {

/// Throws ExecutionError "<op> node '<name>': <message>".
[[noreturn]] inline void fail(const Node& node, const std::string& message) {
  throw ExecutionError(node.op_type + " node '" + node.name + "': " + message);
}

/// Checks that an output has `expected` elements. Outputs are allocated by the executor from shape
/// inference; a kernel that writes by its own index arithmetic checks this rather than overrun.
/// Input `i`, or an empty tensor where the node was given fewer inputs (an omitted trailing
/// optional one).
inline const Tensor& optional_input(const std::vector<Tensor>& inputs, size_t i) {
  static const Tensor none;
  return i < inputs.size() ? inputs[i] : none;
}

inline void require_output_size(const Node& node, const Tensor& out, int64_t expected) {
  if (out.size() != expected)
    fail(node, "output shape " + out.shape().to_string() + " holds " + std::to_string(out.size()) +
                   " elements, the op produces " + std::to_string(expected));
}

/// numpy's maximum: a NaN operand gives NaN.
template <class C>
C max_of(C a, C b) {
  if constexpr (std::is_floating_point_v<C>)
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<C>::quiet_NaN();
  return a > b ? a : b;
}

/// numpy's minimum: a NaN operand gives NaN.
template <class C>
C min_of(C a, C b) {
  if constexpr (std::is_floating_point_v<C>)
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<C>::quiet_NaN();
  return a < b ? a : b;
}

/// Maps an axis in [-rank, rank) to [0, rank).
inline size_t normalize_axis(const Node& node, int64_t axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    fail(node, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

/// The values of an i32/i64 tensor as int64.
inline std::vector<int64_t> read_ints(const Node& node, const Tensor& t, const std::string& what) {
  std::vector<int64_t> out;
  dispatch_index(
      node, t.element_type(),
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        for (T v : t.to_vector<T>()) out.push_back(static_cast<int64_t>(v));
      },
      what);
  return out;
}

/// Number of elements of a shape (1 for a scalar).
inline int64_t element_count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

/// Dense row-major strides, in elements.
inline std::vector<int64_t> dense_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

/// Splits a row-major flat index into a multi-index of `dims`.
inline std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> index(dims.size());
  for (size_t i = dims.size(); i-- > 0;) {
    index[i] = flat % dims[i];
    flat /= dims[i];
  }
  return index;
}

/// The values of any numeric tensor (any strides), in double: for small parameter tensors
/// (scales, zero points, normalization statistics), whatever their element type.
inline std::vector<double> values_as_double(const Tensor& t) {
  std::vector<double> values(static_cast<size_t>(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) values[static_cast<size_t>(i)] = t.value_at(i);
  return values;
}

/// The values of a floating tensor (f32, f64, f16, bf16), in double.
inline std::vector<double> floating_values(const Node& node, const Tensor& t) {
  std::vector<double> values(static_cast<size_t>(t.size()));
  dispatch_floating(node, t.element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = t.data<T>();
    for (size_t k = 0; k < values.size(); ++k) values[k] = load(x[k]);
  });
  return values;
}

/// Writes `values` to `out`, converted to its numeric element type.
inline void store_values(const Node& node, const std::vector<double>& values, Tensor& out) {
  require_output_size(node, out, static_cast<int64_t>(values.size()));
  dispatch_numeric(node, out.element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* y = out.data<T>();
    for (size_t k = 0; k < values.size(); ++k) y[k] = store<T>(values[k]);
  });
}

}  // namespace troupe::kernels::reference
