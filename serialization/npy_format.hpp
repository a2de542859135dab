#pragma once

// NumPy's .npy format: one array per file, as np.save writes it.
//
//   bytes 0-5   magic "\x93NUMPY"
//   bytes 6-7   format version (major, minor): 1.0, 2.0 or 3.0
//   then        header length, little-endian: 2 bytes in 1.0, 4 bytes in 2.0 and 3.0
//   then        the header: a Python dict literal {'descr': '<f4', 'fortran_order': False,
//               'shape': (1, 3), } padded with spaces and ended by '\n' (latin-1; utf-8 in 3.0)
//   then        the elements, dense, in C (row-major) order unless fortran_order is True
//
// troupe reads the little-endian (or byte-order-free) dtypes f2 f4 f8 i1 u1 i4 i8 b1 in C order
// and writes version 1.0 with the header padded so the data starts at a multiple of 64 bytes, as
// numpy does.

#include <cstddef>
#include <string>

#include "troupe/tensor.hpp"

namespace troupe::serialization {

/// Reads an .npy file into a new dense tensor. Throws InvalidArgument naming `path` when it cannot
/// be opened, FormatError naming `path` and the problem when it is not a readable .npy file (bad
/// magic, unknown version, truncated header or data, malformed header, unsupported or big-endian
/// dtype, Fortran order).
Tensor read_npy(const std::string& path);

/// Parses the bytes of an .npy file; `source` names it in errors (as read_npy does with the path).
Tensor parse_npy(const unsigned char* data, size_t size, const std::string& source);

/// The .npy (version 1.0) bytes of `tensor` (any strides). Throws InvalidArgument for an empty
/// tensor or an element type without a NumPy dtype (bf16).
std::string to_npy_bytes(const Tensor& tensor);

/// Writes `tensor` to `path` as .npy version 1.0 (through a temporary file renamed into place).
/// Throws InvalidArgument naming `path` when it cannot be written, or as to_npy_bytes does.
void write_npy(const Tensor& tensor, const std::string& path);

}  // namespace troupe::serialization
