#include "engine/graph/auto_batching.hpp"

namespace troupe::detail {

namespace {
std::string leading_dim_obstacle(const char* what, const ValueInfo& info) {
  if (info.shape.rank() == 0) return std::string(what) + " '" + info.name + "' is a scalar";
  if (info.shape[0] != Shape::dynamic)
    return std::string(what) + " '" + info.name + "' has a static leading dimension (" +
           info.shape.to_string() + ")";
  return {};
}
}  // namespace

std::string batching_obstacle(const CompiledGraph& graph) {
  const Model& model = *graph.model;
  if (model.inputs().empty()) return "the model has no inputs";
  // How many rows these ops output depends on the values, not on the batch: a merged run's
  // output would not split back into each request's.
  for (const Node& node : model.nodes())
    if (node.op_type == "NonZero" || node.op_type == "Compress" || node.op_type == "Unique" ||
        node.op_type == "NonMaxSuppression")
      return node.op_type + " node '" + node.name + "' outputs a number of rows its data decides";
  // Training-mode BatchNormalization normalizes with statistics over the whole batch: in a merged
  // run each request's rows would be normalized with the other requests' values too.
  for (const Node& node : model.nodes())
    if (node.op_type == "BatchNormalization" && node.attributes.get_int_or("training_mode", 0) != 0)
      return node.op_type + " node '" + node.name +
             "' (training_mode=1) normalizes with statistics over the whole batch";
  for (ValueId in : model.inputs())
    if (auto why = leading_dim_obstacle("input", model.value(in)); !why.empty()) return why;
  for (ValueId out : model.outputs())
    if (auto why = leading_dim_obstacle("output", model.value(out)); !why.empty()) return why;
  return {};
}

void fit_batching_to_graph(CompileConfig& config, const CompiledGraph& graph) {
  if (config.auto_batch_max_size <= 1 || batching_obstacle(graph).empty()) return;
  config.auto_batch_max_size = 1;
  config.scheduling.max_batch_size = 1;
  config.scheduling.preferred_batch_sizes.clear();
  config.derive_request_counts();
}

}  // namespace troupe::detail
