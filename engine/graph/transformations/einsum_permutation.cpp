// An Einsum of one operand whose output holds each of its labels once, in another order
// ("bnd->bdn", "...ij->...ji") only moves data: it becomes the Transpose it is, which has fast
// kernels (the Einsum kernels of one operand are the reference's loops).
#include <algorithm>
#include <string>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/ops/einsum.hpp"

namespace troupe::transformations {

size_t permute_einsums_as_transposes(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    const int index = static_cast<int>(i);
    const Node& node = rewrite.node(index);
    if (rewrite.removed(index) || !is_op(node, "Einsum", 1) || node.inputs[0] == no_value) continue;
    const Shape& x = model.value(node.inputs[0]).shape;
    const einsum::Equation eq =
        einsum::parse(node.attributes.get_string_or("equation", ""), {x.rank()});
    if (!eq.error.empty() || eq.inputs.size() != 1) continue;
    const std::vector<int>& in = eq.inputs[0];
    std::vector<int> sorted = in;
    std::sort(sorted.begin(), sorted.end());
    // Every input label once (no diagonal), every one in the output (no sum).
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() ||
        eq.output.size() != in.size())
      continue;
    std::vector<int64_t> perm;
    for (int label : eq.output) {
      const auto at = std::find(in.begin(), in.end(), label);
      if (at == in.end()) break;
      perm.push_back(at - in.begin());
    }
    if (perm.size() != in.size()) continue;
    Node transpose{node.name, "Transpose", {node.inputs[0]}, node.outputs, {}};
    transpose.attributes.set("perm", perm);
    rewrite.replace(index, std::move(transpose), {index});
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
