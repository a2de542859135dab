// Softmax and LogSoftmax along an axis that is not the innermost one, where oneDNN 2.6 has only
// its reference implementation (YOLOv8's distribution-focal-loss head normalizes 16 bins along
// axis 1 of [1, 16, 4, 8400]: 34 ms on oneDNN's reference, 46% of the model's time).
#pragma once

#include <cstdint>

namespace troupe::kernels::onednn {

/// y = softmax (or log-softmax) of x viewed as [outer, n, inner] along its middle axis, inner > 1.
/// x and y may be the same array. Spread over the calling thread's OpenMP team.
void strided_softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log);

/// The longest rows short_rows_softmax() takes.
inline constexpr int64_t max_short_row = 32;

/// y = softmax (or log-softmax) of each of `rows` contiguous rows of n <= max_short_row elements
/// of x (the last axis), where oneDNN's kernel spends most of a row's time entering and leaving
/// it: blocks of rows are transposed so that the rows are vector lanes. x and y may be the same
/// array. Spread over the calling thread's OpenMP team.
void short_rows_softmax(const float* x, float* y, int64_t rows, int64_t n, bool log);

}  // namespace troupe::kernels::onednn
