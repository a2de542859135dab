#pragma once

// ScaledDotProductAttention, troupe's own op (no ONNX counterpart at the opsets troupe reads): the
// graph compiler fuses attention's MatMul -> [Add mask] -> Softmax -> MatMul into it
// (engine/graph/transformations/attention_fusion.cpp), so that the [M, N] scores of a head never
// leave the cache. With the operands as below,
//   Y = Softmax(scale * (Q x Kt) + mask, along the last axis) x V
// where Q is [..., M, K], Kt [..., K, N], V [..., N, D], the mask broadcasts to [..., M, N] and
// the leading (batch) dimensions of Q, Kt and V broadcast as MatMul's do. Y is [..., M, D].
//
// Inputs: Q, Kt, V, and the optional mask. Attributes: "scale" (float, default 1) and, per
// operand, "q_perm", "k_perm", "v_perm": a Transpose the fusion absorbed, the operand being
// Transpose(input, perm) (absent: the input itself); and "y_perm": the output is
// Transpose(Y, y_perm) (attention merging its heads back, [b, h, M, D] -> [b, M, h, D]). A kernel
// reads and writes through strides instead of copying.
#include <array>
#include <cstdint>
#include <vector>

#include "troupe/model.hpp"

namespace troupe::attention {

/// The op type.
inline constexpr const char* op_type = "ScaledDotProductAttention";

/// The operand names, in input order (Q, Kt, V), and their permutation attributes.
inline constexpr const char* operand_names[3] = {"Q", "Kt", "V"};
inline constexpr const char* perm_attributes[4] = {"q_perm", "k_perm", "v_perm", "y_perm"};

/// An operand as the op reads it: its dims and its element strides in the stored input (dense
/// row-major), both in operand order.
struct Operand {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
};

/// Operand `i` (0: Q, 1: Kt, 2: V) of a node whose input i is stored with `stored` dims. Throws
/// ModelError naming the node when the permutation attribute is not a permutation of the rank.
Operand operand(const Node& node, size_t i, const std::vector<int64_t>& stored);

/// The permutation attribute of operand `i` (3: the output, "y_perm"), empty when absent.
std::vector<int64_t> perm(const Node& node, size_t i);

/// Checks `p` (empty, or a permutation of `rank` axes); throws ModelError naming the attribute.
void check_perm(const Node& node, const char* attribute, const std::vector<int64_t>& p,
                size_t rank);

/// The output's stored dims: Y's dims `logical` permuted by y_perm.
std::vector<int64_t> output_dims(const Node& node, const std::vector<int64_t>& logical);

/// The scale attribute.
double scale(const Node& node);

/// The sizes of one run and where each batch's matrices start in the stored inputs.
struct Geometry {
  int64_t m = 0, k = 0, n = 0, d = 0;
  Operand q, kt, v;                 // the operands as read (the inputs permuted)
  std::vector<int64_t> batch_dims;  // Y's leading dimensions
  int64_t batches = 1;              // their product
  bool has_mask = false;
  int64_t mask_row = 0, mask_col = 0;  // the mask's strides along M and N (0: broadcast)
  int64_t y_row = 0, y_col = 0;        // the output's strides along M and D

  /// Element offsets of batch `b`'s matrices (row-major over batch_dims) in Q, Kt, V, the mask
  /// and the output.
  std::array<int64_t, 5> offsets(int64_t b) const;

  // Per tensor (Q, Kt, V, mask, Y), its stride along each of batch_dims (0 where it broadcasts).
  std::array<std::vector<int64_t>, 5> batch_strides;
};

/// The geometry of a run on inputs of these dims (`mask` null when absent). Throws
/// ExecutionError naming the node when they do not chain or broadcast.
Geometry geometry(const Node& node, const std::vector<int64_t>& q, const std::vector<int64_t>& kt,
                  const std::vector<int64_t>& v, const std::vector<int64_t>* mask);

}  // namespace troupe::attention
