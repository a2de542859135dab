#include "engine/graph/auto_batching.hpp"

#include "engine/graph/transformations/graph_queries.hpp"

namespace troupe::detail {

namespace {
std::string leading_dim_obstacle(const char* what, const ValueInfo& info) {
  if (info.type == ElementType::string)
    return std::string(what) + " '" + info.name + "' holds strings, which do not stack as bytes";
  if (info.shape.rank() == 0) return std::string(what) + " '" + info.name + "' is a scalar";
  if (info.shape[0] != Shape::dynamic)
    return std::string(what) + " '" + info.name + "' has a static leading dimension (" +
           info.shape.to_string() + ")";
  return {};
}

// Why a node's result would not split back into each request's after a merged run, or empty.
std::string node_obstacle(const Model& model, const Node& node) {
  const std::string named = node.op_type + " node '" + node.name + "'";
  // How many rows these output depends on the values, not on the batch.
  if (transformations::outputs_sized_by_data(node.op_type))
    return named + " outputs a number of rows its data decides";
  // RoiAlign outputs a row per roi, and its batch_indices count from each request's first image.
  if (node.op_type == "RoiAlign")
    return named + " outputs a row per roi and indexes images by batch";
  // MaxUnpool's indices are flat over the whole tensor, batch included: they agree with a merged
  // run only when a MaxPool of that run computed them.
  if (node.op_type == "MaxUnpool" && node.inputs.size() > 1) {
    for (const Node& producer : model.nodes())
      if (producer.op_type == "MaxPool" && producer.outputs.size() > 1 &&
          producer.outputs[1] == node.inputs[1])
        return {};
    return named + " takes indices over the whole tensor, batch included, from outside the graph";
  }
  // Training-mode BatchNormalization normalizes with statistics over the whole batch.
  if (node.op_type == "BatchNormalization" && node.attributes.get_int_or("training_mode", 0) != 0)
    return named + " (training_mode=1) normalizes with statistics over the whole batch";
  return {};
}

}  // namespace

std::string batching_obstacle(const CompiledGraph& graph) {
  const Model& model = *graph.model;
  if (model.inputs().empty()) return "the model has no inputs";
  for (const Node& node : model.nodes())
    if (auto why = node_obstacle(model, node); !why.empty()) return why;
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
