#include "engine/ops/op_schema.hpp"

namespace troupe {

void ShapeInferContext::fail(const std::string& message) const {
  throw ModelError(node.op_type + " node '" + node.name + "': " + message);
}

OpSchemaRegistry& OpSchemaRegistry::instance() {
  static OpSchemaRegistry registry;
  return registry;
}

OpSchemaRegistry::OpSchemaRegistry() {
  register_elementwise_ops(*this);
  register_linear_algebra_ops(*this);
  register_convolution_ops(*this);
  register_pooling_ops(*this);
  register_normalization_ops(*this);
  register_shape_ops(*this);
  register_reduction_ops(*this);
  register_resize_ops(*this);
  register_recurrent_ops(*this);
  register_quantization_ops(*this);
  register_loss_ops(*this);
  register_selection_ops(*this);
  register_control_flow_ops(*this);
  register_signal_ops(*this);
  register_sampling_ops(*this);
  register_training_ops(*this);
  register_text_ops(*this);
  register_attention_ops(*this);
}

std::string qualified_op_type(const std::string& domain, const std::string& op_type) {
  if (domain.empty() || domain == "ai.onnx") return op_type;
  return domain + "::" + op_type;
}

void OpSchemaRegistry::add(OpSchema schema) {
  std::string key = schema.op_type;
  schemas_[key] = std::move(schema);
}

const OpSchema* OpSchemaRegistry::find(const std::string& op_type) const {
  auto it = schemas_.find(op_type);
  return it == schemas_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpSchemaRegistry::op_types() const {
  std::vector<std::string> out;
  for (const auto& [type, schema] : schemas_) out.push_back(type);
  return out;
}

}  // namespace troupe
