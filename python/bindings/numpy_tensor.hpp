#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

namespace troupe::python {

namespace py = pybind11;

/// The NumPy dtype of an element type; bf16 has none and is seen as uint16 (its bits).
py::dtype dtype_of(ElementType type);

/// The element type of a NumPy dtype, or undefined. uint16 is bf16 only when `wanted` is bf16.
ElementType element_type_of(const py::dtype& dtype, ElementType wanted = ElementType::undefined);

/// The tensor to bind for a caller's value (a troupe.Tensor, a NumPy array or anything
/// numpy.asarray takes) fed to `expected`. A C-contiguous, aligned, native-endian array of a
/// troupe dtype is wrapped without a copy when `share`; the tensor then keeps the array alive.
/// Otherwise the data is copied. Throws TypeError naming `expected` for an unusable dtype.
/// `wrapped`, when given, is set to whether the tensor wraps `value`'s own memory.
Tensor tensor_from_python(py::handle value, const ValueInfo& expected, bool share,
                          bool* wrapped = nullptr);

/// An array of a tensor's elements: a view whose base keeps the tensor's memory alive (`share`,
/// possible when the tensor owns its memory) or a copy.
py::array array_from_tensor(const Tensor& tensor, bool share);

/// A shape as a tuple (-1 for a dynamic dimension) and back.
py::tuple shape_to_python(const Shape& shape);
Shape shape_from_python(py::handle dims);

void bind_tensor(py::module_& m);

}  // namespace troupe::python
