// Reads a MatMul's B through the Transpose that swaps its last two axes (x @ y.T of a similarity
// or retrieval score, K^T of an attention the attention fusion left, a Linear layer applied to a
// transposed activation): the MatMul takes the Transpose's input with "fused_transpose_b" and
// oneDNN's matmul reads it with swapped strides, so the transposed copy is never written. The
// MatMul keeps its name and stands for the Transpose too.
#include <string>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/ops/fused_post_ops.hpp"

namespace troupe::transformations {

namespace {

// Whether `transpose` swaps the last two of its input's axes and keeps the others in place.
// (The default permutation, the axes reversed, is such a swap in 2-D only.)
bool swaps_last_two_axes(const Model& model, const Node& transpose) {
  const std::optional<std::vector<int64_t>> perm = permutation(model, transpose);
  const size_t rank = perm ? perm->size() : 0;
  if (rank < 2) return false;
  for (size_t i = 0; i + 2 < rank; ++i)
    if ((*perm)[i] != static_cast<int64_t>(i)) return false;
  return (*perm)[rank - 2] == static_cast<int64_t>(rank - 1) &&
         (*perm)[rank - 1] == static_cast<int64_t>(rank - 2);
}

}  // namespace

size_t read_transposed_b(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    Node& mm = rewrite.nodes()[i];
    const int index = static_cast<int>(i);
    if (rewrite.removed(index) || mm.op_type != "MatMul" || mm.inputs.size() < 2 ||
        mm.outputs.size() != 1 || fused::transposes_b(mm) ||
        model.value(mm.outputs[0]).type != ElementType::f32)
      continue;
    const int t = rewrite.producer(mm.inputs[1]);
    if (t < 0 || rewrite.sole_reader(mm.inputs[1]) != index) continue;
    const Node& transpose = rewrite.node(t);
    if (!is_op(transpose, "Transpose", 1) || model.is_constant(transpose.inputs[0]) ||
        !swaps_last_two_axes(model, transpose))
      continue;
    mm.inputs[1] = transpose.inputs[0];
    mm.attributes.set("fused_transpose_b", int64_t{1});
    rewrite.absorb(mm.name, {t});
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
