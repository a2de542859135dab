#include "engine/src/memory_plan.hpp"

#include <algorithm>

namespace troupe::detail {

size_t MemoryPlan::total_bytes() const {
  size_t total = 0;
  for (size_t b : buffer_bytes) total += b;
  return total;
}

MemoryPlan plan_memory(const Model& model) {
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

  // Index of the last node reading each value (the writer's own index when nothing reads it).
  std::vector<size_t> last_use(value_count, 0);
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (ValueId v : nodes[n].outputs) last_use[v] = n;
    for (ValueId v : nodes[n].inputs)
      if (v != no_value) last_use[v] = std::max(last_use[v], n);
  }

  std::vector<int> free_buffers;
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (ValueId v : nodes[n].outputs) {
      if (!owned[v]) continue;
      const ValueInfo& info = model.value(v);
      const size_t bytes =
          static_cast<size_t>(info.shape.element_count()) * element_size(info.type);
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
      if (v != no_value && plan.buffer_of[v] != MemoryPlan::unplanned && last_use[v] == n &&
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
