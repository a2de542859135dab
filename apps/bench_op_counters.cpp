#include "apps/bench_op_counters.hpp"

#include "engine/runtime/compiled_model_impl.hpp"

namespace troupe::apps {

std::vector<OpCounter> op_counters(const CompiledModel& compiled, const std::string& pc_sort) {
  detail::CompiledModelImpl& impl = *compiled.impl();
  const auto& graph = *impl.graph();
  const auto& nodes = graph.model->nodes();
  const std::vector<std::string> implementations = impl.node_implementations();
  std::vector<OpCounter> out(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    out[n].name = nodes[n].name;
    out[n].type = nodes[n].op_type;
    out[n].implementation = n < implementations.size() ? implementations[n] : "?";
    out[n].precision = detail::runtime_precision(*graph.model, nodes[n], graph.inference_precision,
                                                 out[n].implementation);
  }
  for (const auto& t : impl.context().stats.traces()) {
    for (size_t n = 0; n < t.ops.size() && n < out.size(); ++n) {
      ++out[n].runs;
      out[n].real_us += static_cast<double>(t.ops[n].real_ns) / 1e3;
      out[n].cpu_us += static_cast<double>(t.ops[n].cpu_ns) / 1e3;
    }
  }

  if (pc_sort == "sort" || pc_sort == "simple_sort")
    std::stable_sort(out.begin(), out.end(), [](const OpCounter& a, const OpCounter& b) {
      return a.mean_real_us() > b.mean_real_us();
    });
  if (pc_sort == "simple_sort")
    out.erase(std::remove_if(out.begin(), out.end(),
                             [](const OpCounter& op) { return !(op.mean_real_us() > 0); }),
              out.end());
  return out;
}

}  // namespace troupe::apps
