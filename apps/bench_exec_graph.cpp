#include "apps/bench_exec_graph.hpp"

#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/bench_output_file.hpp"
#include "apps/bench_report_json.hpp"

namespace troupe::apps {

namespace {

using json = nlohmann::json;

json exec_graph_json(const Model& model) {
  auto values_json = [&](const std::vector<ValueId>& ids) {
    json arr = json::array();
    // An omitted optional input (Resize's roi, Clip's min) is null, in its position.
    for (ValueId id : ids) arr.push_back(id == no_value ? json() : value_json(model.value(id)));
    return arr;
  };
  json nodes = json::array();
  for (const auto& node : model.nodes()) {
    const Attributes& a = node.attributes;
    json original = json::array();
    if (a.has("original_names"))
      for (const auto& n : std::get<std::vector<std::string>>(a.all().at("original_names")))
        original.push_back(n);
    nodes.push_back({{"name", node.name},
                     {"layer_type", a.get_string_or("layer_type", node.op_type)},
                     {"execution_order", a.get_int_or("execution_order", -1)},
                     {"implementation", a.get_string_or("implementation", "")},
                     {"output_layouts", a.get_string_or("output_layouts", "")},
                     {"original_names", original},
                     {"inputs", values_json(node.inputs)},
                     {"outputs", values_json(node.outputs)}});
  }
  return {{"model", model.name()}, {"nodes", nodes}};
}

}  // namespace

void write_exec_graph(const std::string& path, const CompiledModel& compiled) {
  write_output_file(path, "execution graph",
                    exec_graph_json(*compiled.runtime_model()).dump(2) + "\n");
  fmt::print("\nexecution graph written to {}\n", path);
}

}  // namespace troupe::apps
