#include "engine/graph/memory_plan.hpp"

#include <algorithm>
#include <set>
#include <string>

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

}  // namespace

MemoryPlan plan_memory(const Model& model, const std::vector<ElementType>& stored_types) {
  const size_t value_count = model.values().size();
  const auto& nodes = model.nodes();
  MemoryPlan plan;
  plan.buffer_of.assign(value_count, MemoryPlan::unplanned);

  std::vector<bool> owned(value_count, false);
  for (const Node& node : nodes)
    for (ValueId v : node.outputs) {
      const ValueInfo& info = model.value(v);
      owned[v] = info.shape.is_static() && info.type != ElementType::undefined;
    }
  for (ValueId v : model.outputs()) owned[v] = false;
  for (ValueId v : model.inputs()) owned[v] = false;
  for (const auto& constant : model.constants()) owned[constant.first] = false;

  // A planned view of a planned value of the same size and type is stored in it.
  plan.storage_of.resize(value_count);
  for (ValueId v = 0; v < static_cast<ValueId>(value_count); ++v) plan.storage_of[v] = v;
  for (const Node& node : nodes) {
    if (!is_view(node)) continue;
    const ValueId in = node.inputs[0];
    const ValueId out = node.outputs[0];
    if (in == no_value || out == no_value || !owned[in] || !owned[out]) continue;
    const ValueInfo& a = model.value(in);
    const ValueInfo& b = model.value(out);
    if (a.type == b.type && byte_size(a) == byte_size(b))
      plan.storage_of[out] = plan.storage_of[in];
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
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (ValueId v : nodes[n].outputs) {
      if (!owned[v]) continue;
      if (storage(v) != v) {
        plan.buffer_of[v] = plan.buffer_of[storage(v)];
        continue;
      }
      const size_t bytes =
          static_cast<size_t>(model.value(v).shape.element_count()) *
          element_size(static_cast<size_t>(v) < stored_types.size() ? stored_types[v]
                                                                    : model.value(v).type);
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
