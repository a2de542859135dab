#include "engine/graph/memory_plan.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <string>

#include "kernels/slice_plan.hpp"

namespace troupe::detail {

size_t MemoryPlan::total_bytes() const {
  size_t total = 0;
  for (size_t b : buffer_bytes) total += b;
  return total;
}

namespace {

// Ops whose output is their first input's bytes unchanged. Their kernels must accept an output
// that is the input's memory: the reference ones (kernels/reference/shape.cpp, copy_elements), the
// only ones registered for these ops, then copy nothing.
bool is_view(const Node& node) {
  static const std::set<std::string> views = {"Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                              "Identity"};
  return views.count(node.op_type) != 0 && node.outputs.size() == 1 && !node.inputs.empty();
}

size_t byte_size(const ValueInfo& info) {
  return static_cast<size_t>(info.shape.element_count()) * element_size(info.type);
}

// Hosted parts start on cache lines, as every buffer does (kernels may rely on the alignment).
constexpr size_t part_alignment = 64;

// The byte size of each input's slice of a Concat's output when every slice is one contiguous run
// in `layout` (everything before the axis of size 1; channel-blocked: 4-D, joined along whole
// channel blocks; never channels-last, where each pixel interleaves the inputs); else nothing.
std::optional<std::vector<size_t>> concat_runs(const Model& model, const Node& node,
                                               const kernels::TensorLayout& layout,
                                               size_t element_bytes) {
  const Shape& out = model.value(node.outputs[0]).shape;
  const auto rank = static_cast<int64_t>(out.rank());
  int64_t axis = node.attributes.get_int_or("axis", 0);
  if (axis < 0) axis += rank;
  if (rank == 0 || axis < 0 || axis >= rank || layout.channels_last) return std::nullopt;
  if (layout.channel_block > 0 && (rank < 4 || rank > 5 || axis != 1)) return std::nullopt;
  for (int64_t d = 0; d < axis; ++d)
    if (out[static_cast<size_t>(d)] != 1) return std::nullopt;
  std::vector<size_t> runs;
  for (ValueId in : node.inputs) {
    if (in == no_value) return std::nullopt;
    const Shape& shape = model.value(in).shape;
    if (!shape.is_static() || shape.rank() != out.rank()) return std::nullopt;
    if (layout.channel_block > 0 && shape[1] % layout.channel_block != 0) return std::nullopt;
    runs.push_back(static_cast<size_t>(shape.element_count()) * element_bytes);
  }
  return runs;
}

// The byte offset of each output's elements in its input when every output of this Slice or
// Split is one contiguous run of the input's row-major elements (everything before the cut axis
// of size 1, everything after it whole, step 1, bounds known now); else nothing.
std::optional<std::vector<size_t>> sub_runs(const Model& model, const Node& node,
                                            size_t element_bytes) {
  const ValueId source = node.inputs.empty() ? no_value : node.inputs[0];
  if (source == no_value || !model.value(source).shape.is_static()) return std::nullopt;
  const std::vector<int64_t>& in = model.value(source).shape.dims();
  std::vector<int64_t> strides(in.size(), 1);
  for (size_t d = in.size(); d-- > 1;) strides[d - 1] = strides[d] * in[d];
  // One output's first index per axis and its extents: a run when the axes before the first cut
  // one have extent 1 and those after it are whole.
  const auto run_offset = [&](const std::vector<int64_t>& first,
                              const std::vector<int64_t>& count) -> std::optional<size_t> {
    size_t d = 0;
    while (d < in.size() && count[d] == 1) ++d;
    if (d < in.size()) ++d;  // the cut axis
    for (; d < in.size(); ++d)
      if (first[d] != 0 || count[d] != in[d]) return std::nullopt;
    int64_t offset = 0;
    for (size_t a = 0; a < in.size(); ++a) offset += first[a] * strides[a];
    return static_cast<size_t>(offset) * element_bytes;
  };
  std::vector<size_t> offsets;
  if (node.op_type == "Slice") {
    std::vector<Tensor> inputs(node.inputs.size());
    for (size_t i = 1; i < node.inputs.size(); ++i) {
      if (node.inputs[i] == no_value) continue;
      if (!model.is_constant(node.inputs[i])) return std::nullopt;
      inputs[i] = model.constants().at(node.inputs[i]);
    }
    kernels::SlicePlan plan;
    try {
      plan = kernels::read_slice_plan(node, inputs, in);
    } catch (const std::exception&) {
      return std::nullopt;  // the kernel reports it when the node runs
    }
    for (int64_t step : plan.step)
      if (step != 1) return std::nullopt;
    const auto offset = run_offset(plan.first, plan.count);
    if (!offset) return std::nullopt;
    offsets.push_back(*offset);
    return offsets;
  }
  // Split: consecutive parts along the axis, each output's extent its shape's.
  const auto rank = static_cast<int64_t>(in.size());
  int64_t axis = node.attributes.get_int_or("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  int64_t first = 0;
  for (ValueId out : node.outputs) {
    if (out == no_value) return std::nullopt;
    const Shape& shape = model.value(out).shape;
    if (!shape.is_static() || shape.rank() != in.size()) return std::nullopt;
    std::vector<int64_t> starts(in.size(), 0);
    starts[static_cast<size_t>(axis)] = first;
    const auto offset = run_offset(starts, shape.dims());
    if (!offset) return std::nullopt;
    offsets.push_back(*offset);
    first += shape[static_cast<size_t>(axis)];
  }
  return offsets;
}

}  // namespace

MemoryPlan plan_memory(const Model& model, const std::vector<ElementType>& stored_types,
                       const std::vector<kernels::TensorLayout>& layouts) {
  const size_t value_count = model.values().size();
  const auto& nodes = model.nodes();
  MemoryPlan plan;
  plan.buffer_of.assign(value_count, MemoryPlan::unplanned);

  std::vector<bool> owned(value_count, false);
  for (const Node& node : nodes)
    for (ValueId v : node.outputs) {
      const ValueInfo& info = model.value(v);
      owned[v] = info.shape.is_static() && info.type != ElementType::undefined &&
                 info.type != ElementType::string;
    }
  for (ValueId v : model.outputs()) owned[v] = false;
  for (ValueId v : model.inputs()) owned[v] = false;
  for (const auto& constant : model.constants()) owned[constant.first] = false;

  const auto stored_type = [&](ValueId v) {
    return static_cast<size_t>(v) < stored_types.size() ? stored_types[v] : model.value(v).type;
  };
  const auto layout_of = [&](ValueId v) {
    return static_cast<size_t>(v) < layouts.size() ? layouts[v] : kernels::TensorLayout{};
  };
  const auto stored_bytes = [&](ValueId v) {
    return static_cast<size_t>(model.value(v).shape.element_count()) * element_size(stored_type(v));
  };
  plan.storage_of.resize(value_count);
  for (ValueId v = 0; v < static_cast<ValueId>(value_count); ++v) plan.storage_of[v] = v;
  plan.offset_of.assign(value_count, 0);

  std::vector<int> producer(value_count, -1);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (ValueId v : nodes[n].outputs)
      if (v != no_value) producer[static_cast<size_t>(v)] = static_cast<int>(n);

  // Concats, the last first, so that a join that is itself part of a later one places its parts
  // inside that one. `hosts[v]`: some other value lives in v's memory.
  std::vector<bool> hosts(value_count, false);
  for (size_t n = nodes.size(); n-- > 0;) {
    const Node& node = nodes[n];
    if (node.op_type != "Concat" || node.outputs.size() != 1 || node.outputs[0] == no_value)
      continue;
    const ValueId joined = node.outputs[0];
    if (!owned[joined]) continue;
    const kernels::TensorLayout layout = layout_of(joined);
    const auto runs = concat_runs(model, node, layout, element_size(stored_type(joined)));
    if (!runs) continue;
    const auto alike = [&](ValueId v) {
      return layout_of(v) == layout && stored_type(v) == stored_type(joined);
    };
    // Every part already in place, one after the other: the join is a view of them.
    if (plan.storage_of[joined] == joined && !hosts[joined]) {
      bool in_place = true;
      const ValueId first = node.inputs[0];
      size_t at = plan.offset_of[first];
      for (size_t i = 0; i < node.inputs.size() && in_place; ++i) {
        const ValueId in = node.inputs[i];
        in_place = plan.storage_of[in] != in && plan.storage_of[in] == plan.storage_of[first] &&
                   plan.offset_of[in] == at && alike(in);
        at += (*runs)[i];
      }
      if (in_place) {
        plan.storage_of[joined] = plan.storage_of[first];
        plan.offset_of[joined] = plan.offset_of[first];
        continue;
      }
    }
    // Otherwise each part that lives on its own is written into its slice.
    const ValueId root = plan.storage_of[joined];
    size_t at = plan.offset_of[joined];
    std::set<ValueId> seen;
    const auto free_value = [&](ValueId v) {
      return owned[v] && plan.storage_of[v] == v && !hosts[v] && alike(v) && !seen.count(v);
    };
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const ValueId in = node.inputs[i];
      if ((*runs)[i] > 0 && at % part_alignment == 0 && free_value(in)) {
        plan.storage_of[in] = root;
        plan.offset_of[in] = at;
        hosts[root] = true;
        // A part a view made (torch.stack's Unsqueeze before the join) has its source written
        // into the slice instead: the view is then that memory, and nothing is copied.
        const int p = producer[static_cast<size_t>(in)];
        if (p >= 0 && is_view(nodes[static_cast<size_t>(p)])) {
          const ValueId source = nodes[static_cast<size_t>(p)].inputs[0];
          if (source != no_value && free_value(source) && source != in &&
              stored_bytes(source) == stored_bytes(in)) {
            plan.storage_of[source] = root;
            plan.offset_of[source] = at;
            seen.insert(source);
          }
        }
      }
      seen.insert(in);
      at += (*runs)[i];
    }
  }

  // A planned view of a planned value of the same size and type is stored in it (where that
  // value is stored). A view that is itself a hosted part copies its input into its slice.
  for (const Node& node : nodes) {
    if (node.op_type == "Slice" || node.op_type == "Split") {
      // A part of one run of its input is that memory (the kernels then copy nothing).
      const ValueId in = node.inputs.empty() ? no_value : node.inputs[0];
      if (in == no_value || !owned[in] || !layout_of(in).is_plain()) continue;
      const auto offsets = sub_runs(model, node, element_size(stored_type(in)));
      if (!offsets) continue;
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        const ValueId out = node.outputs[o];
        const size_t at = plan.offset_of[in] + (*offsets)[o];
        if (!owned[out] || plan.storage_of[out] != out || hosts[out] ||
            !layout_of(out).is_plain() || stored_type(out) != stored_type(in) ||
            at % part_alignment != 0)
          continue;
        plan.storage_of[out] = plan.storage_of[in];
        plan.offset_of[out] = at;
      }
      continue;
    }
    if (!is_view(node)) continue;
    const ValueId in = node.inputs[0];
    const ValueId out = node.outputs[0];
    if (in == no_value || out == no_value || !owned[in] || !owned[out]) continue;
    if (plan.storage_of[out] != out || hosts[out]) continue;
    const ValueInfo& a = model.value(in);
    const ValueInfo& b = model.value(out);
    if (a.type == b.type && byte_size(a) == byte_size(b) && stored_type(in) == stored_type(out)) {
      plan.storage_of[out] = plan.storage_of[in];
      plan.offset_of[out] = plan.offset_of[in];
    }
  }
  auto storage = [&](ValueId v) { return plan.storage_of[v]; };

  // Index of the last node reading each stored value, through any of its views (the writer's own
  // index when nothing reads it).
  std::vector<size_t> last_use(value_count, 0);
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (ValueId v : nodes[n].outputs)
      if (v != no_value && storage(v) == v) last_use[v] = n;
    for (ValueId v : nodes[n].inputs)
      if (v != no_value) last_use[storage(v)] = std::max(last_use[storage(v)], n);
    for (ValueId v : nodes[n].outputs)
      if (v != no_value) last_use[storage(v)] = std::max(last_use[storage(v)], n);
  }

  std::vector<int> free_buffers;
  // A stored value's buffer is taken when the first of the values living in it is written (a
  // hosted part is written before the Concat that owns the memory).
  const auto allocate = [&](ValueId v) {
    if (plan.buffer_of[v] != MemoryPlan::unplanned) return;
    const size_t bytes = stored_bytes(v);
    plan.unshared_bytes += bytes;
    // Best fit: the smallest free buffer that holds the value; else grow the largest free one
    // (one allocation instead of two); else a new buffer.
    auto best = free_buffers.end();
    for (auto it = free_buffers.begin(); it != free_buffers.end(); ++it) {
      const size_t size = plan.buffer_bytes[static_cast<size_t>(*it)];
      if (size >= bytes &&
          (best == free_buffers.end() || size < plan.buffer_bytes[static_cast<size_t>(*best)]))
        best = it;
    }
    if (best == free_buffers.end() && !free_buffers.empty())
      best = std::max_element(free_buffers.begin(), free_buffers.end(), [&](int a, int b) {
        return plan.buffer_bytes[static_cast<size_t>(a)] <
               plan.buffer_bytes[static_cast<size_t>(b)];
      });
    int buffer;
    if (best != free_buffers.end()) {
      buffer = *best;
      free_buffers.erase(best);
      size_t& size = plan.buffer_bytes[static_cast<size_t>(buffer)];
      size = std::max(size, bytes);
    } else {
      buffer = static_cast<int>(plan.buffer_bytes.size());
      plan.buffer_bytes.push_back(bytes);
    }
    plan.buffer_of[v] = buffer;
  };
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (ValueId v : nodes[n].outputs) {
      if (!owned[v]) continue;
      allocate(storage(v));
      plan.buffer_of[v] = plan.buffer_of[storage(v)];
    }
    // Released only after the node ran: its outputs must not land in its own inputs.
    auto release = [&](ValueId v) {
      if (v == no_value) return;
      v = storage(v);
      if (plan.buffer_of[v] != MemoryPlan::unplanned && last_use[v] == n &&
          std::find(free_buffers.begin(), free_buffers.end(), plan.buffer_of[v]) ==
              free_buffers.end())
        free_buffers.push_back(plan.buffer_of[v]);
    };
    for (ValueId v : nodes[n].inputs) release(v);
    for (ValueId v : nodes[n].outputs) release(v);
  }
  return plan;
}

}  // namespace troupe::detail
