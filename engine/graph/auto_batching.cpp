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
  // RoiAlign outputs a row per roi, and its batch_indices count from each request's first image.
  // MaxUnpool's indices are flat over the whole tensor, batch included: they agree with a merged
  // run only when a MaxPool of that run computed them.
  for (const Node& node : model.nodes()) {
    if (node.op_type == "RoiAlign")
      return "RoiAlign node '" + node.name + "' outputs a row per roi and indexes images by batch";
    if (node.op_type == "MaxUnpool" && node.inputs.size() > 1) {
      bool from_max_pool = false;
      for (const Node& producer : model.nodes())
        if (producer.op_type == "MaxPool" && producer.outputs.size() > 1 &&
            producer.outputs[1] == node.inputs[1])
          from_max_pool = true;
      if (!from_max_pool)
        return "MaxUnpool node '" + node.name +
               "' takes indices over the whole tensor, batch included, from outside the graph";
    }
  }
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
