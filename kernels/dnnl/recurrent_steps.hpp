// The recurrent product of one step of an RNN, GRU or LSTM (h_{t-1} x R^T) for a block of hidden
// units at a time, on R repacked so that a block's gate rows are one contiguous run.
//
// Each step of a batch-1 recurrence reads all of R (4 x 256 x 256 floats, 1 MB, for an LSTM of
// 256 units) to compute one row of gates: a product bound by the rate R streams in, which sgemm's
// row-by-row dot products (11 us on one Zen 4 core) reach at 60% of what 16-wide columns read in
// order do (6.8 us). Blocks of units also let a step's gate arithmetic follow its block's product
// while the block is in registers' reach, and let the threads of a stream keep their own share
// of R in their own core's cache from one step to the next.
#pragma once

#include <cstdint>

namespace troupe::kernels::onednn {

/// Hidden units per block of the packed recurrent weights.
constexpr int64_t recurrent_unit_block = 16;

/// Floats of one direction's R [gates * hidden, hidden] packed by pack_recurrent_weights.
int64_t packed_recurrent_weights_size(int64_t gates, int64_t hidden);

/// One direction's R [gates * hidden, hidden] (row-major) into `packed`: for each block of 16
/// hidden units, for each gate, for each k < hidden, the block's 16 weights R[gate * hidden + unit]
/// [k] (units past `hidden` are zero).
void pack_recurrent_weights(const float* R, int64_t gates, int64_t hidden, float* packed);

/// Batch rows one call computes together (R's block read once for all of them).
constexpr int64_t max_recurrent_block_rows = 4;

/// acc[(r * gates + g) * 16 + l] = sum over k of h[r * ldh + k] * R[g * hidden + block * 16 + l]
/// [k], for each of `rows` (1..max_recurrent_block_rows) rows r of h, every gate g < gates (1 to
/// 4) and l < 16, from `packed` as pack_recurrent_weights wrote it.
void recurrent_block_product(const float* packed, int64_t block, int64_t gates, int64_t hidden,
                             const float* h, int64_t ldh, int64_t rows, float* acc);

}  // namespace troupe::kernels::onednn
