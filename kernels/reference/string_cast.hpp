#pragma once

// Cast and CastLike to and from strings (ONNX): numbers are written the way NumPy's str() writes
// them (the shortest text that reads back to the same value; positional for values from 1e-4 up to
// 1e16, scientific outside; "nan", "inf", "-inf"), and strings are read as C's strtod/strtoll read
// them
// ("NaN", "INF", "+INF", "-INF" included). A string that is not a number fails naming the node and
// the element.

#include <string>

#include "troupe/model.hpp"

namespace troupe::kernels::reference {

/// out = Cast(in) where `in`, `out` or both hold strings; same element count.
void cast_strings(const Node& node, const Tensor& in, Tensor& out);

/// The text of `value` as NumPy's str() writes a float32 (`single`) or float64.
std::string format_floating(double value, bool single);

}  // namespace troupe::kernels::reference
