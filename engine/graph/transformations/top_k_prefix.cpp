// `x.argsort()[..., :k]` and `x.sort()[0][..., :k]` export as a TopK of the whole axis (K read
// from the input's Shape) followed by a Slice of the first k: a full sort of every row to keep a
// few. A Point Transformer's 16 nearest of 512 points per point took 7.7 ms that way, half of the
// model's time; TopK's own kernel selects the best k of a row in linear time. Where every reader
// of the TopK takes a prefix along its axis, K becomes the longest prefix taken (the Slices stay:
// they now take all or part of a shorter result). Only a sorted TopK: its first k are then the
// top k, ties included (lower index first either way).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/graph/transformations/transformations.hpp"

namespace troupe::transformations {

namespace {

// The end of the prefix a Slice takes along `axis` of its rank-`rank` data (start 0, step 1,
// constant), or nullopt when it takes something else or the axis is not sliced.
std::optional<int64_t> prefix_end(const Model& model, const Node& slice, int64_t axis,
                                  int64_t rank) {
  const std::optional<SliceParameters> p = slice_parameters(model, slice);
  if (!p) return std::nullopt;
  for (size_t i = 0; i < p->starts.size(); ++i) {
    int64_t a = p->axes.empty() ? static_cast<int64_t>(i) : p->axes[i];
    if (a < 0) a += rank;
    if (a != axis) continue;
    if (p->starts[i] != 0 || (!p->steps.empty() && p->steps[i] != 1) || p->ends[i] <= 0)
      return std::nullopt;
    return p->ends[i];
  }
  return std::nullopt;
}

}  // namespace

size_t shorten_sorted_prefixes(Model& model) {
  const std::vector<std::vector<int>> reader = readers(model);
  return expand_nodes(model, [&](const Node& node, std::vector<Node>& nodes) {
    if (node.op_type != "TopK" || node.inputs.size() != 2 || node.outputs.size() != 2 ||
        node.attributes.get_int_or("sorted", 1) == 0)
      return false;
    const Shape& x = model.value(node.inputs[0]).shape;
    const auto rank = static_cast<int64_t>(x.rank());
    int64_t axis = node.attributes.get_int_or("axis", -1);
    if (axis < 0) axis += rank;
    if (rank == 0 || axis < 0 || axis >= rank) return false;
    // The longest prefix any reader takes; every reader must take one.
    int64_t longest = 0;
    for (ValueId out : node.outputs) {
      if (out == no_value) continue;
      if (is_model_output(model, out)) return false;
      for (int r : reader[static_cast<size_t>(out)]) {
        const Node& slice = model.nodes()[static_cast<size_t>(r)];
        if (slice.inputs[0] != out) return false;  // reads the TopK's result other than as data
        const auto end = prefix_end(model, slice, axis, rank);
        if (!end) return false;
        longest = std::max(longest, std::min(*end, std::numeric_limits<int64_t>::max() / 2));
      }
    }
    const auto k = constant_ints(model, node, 1);
    if (longest == 0 || (k && (k->size() != 1 || (*k)[0] <= longest))) return false;
    const ValueId prefix = model.add_constant(unique_value_name(model, node.name + "/prefix"),
                                              int64_tensor({longest}));
    Node shortened = node;
    if (k) {
      shortened.inputs[1] = prefix;
    } else {
      // K known at run time only (the axis's length): the shorter of it and the prefix.
      const ValueId shorter =
          model.add_value({unique_value_name(model, node.name + "/k"), ElementType::i64, {}});
      nodes.push_back(Node{node.name + "/k", "Min", {node.inputs[1], prefix}, {shorter}, {}});
      shortened.inputs[1] = shorter;
    }
    nodes.push_back(std::move(shortened));
    return true;
  });
}

}  // namespace troupe::transformations
