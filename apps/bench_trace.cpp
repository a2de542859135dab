#include "apps/bench_trace.hpp"

#include <vector>

#include <fmt/format.h>

#include "actors/trace_export.hpp"
#include "apps/bench_output_file.hpp"
#include "engine/runtime/compiled_model_impl.hpp"

namespace troupe::apps {

void write_chrome_trace(const std::string& path, const CompiledModel& compiled) {
  detail::CompiledModelImpl& impl = *compiled.impl();
  std::vector<std::string> op_names;
  for (const auto& node : impl.graph()->model->nodes()) op_names.push_back(node.name);
  write_output_file(path, "trace",
                    detail::chrome_trace_json(impl.context().stats.traces(),
                                              impl.config().num_streams, op_names));
  fmt::print("\ntrace written to {} (open it in the Perfetto UI or chrome://tracing)\n", path);
}

void write_timeline(const std::string& path, const CompiledModel& compiled) {
  detail::CompiledModelImpl& impl = *compiled.impl();
  write_output_file(path, "timeline",
                    detail::timeline_svg(impl.context().stats.traces(), impl.config().num_streams));
  fmt::print("timeline written to {}\n", path);
}

}  // namespace troupe::apps
