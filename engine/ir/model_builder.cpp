#include "troupe/model_builder.hpp"

#include "troupe/error.hpp"

namespace troupe {

ModelBuilder::ModelBuilder(std::string model_name)
    : model_(std::make_shared<Model>(std::move(model_name))) {}

ValueId ModelBuilder::input(const std::string& name, ElementType type, const Shape& shape) {
  return model_->add_input(name, type, shape);
}

ValueId ModelBuilder::constant(const std::string& name, Tensor data) {
  return model_->add_constant(name, std::move(data));
}

ValueId ModelBuilder::op(const std::string& op_type, const std::vector<ValueId>& inputs,
                         Attributes attributes, const std::string& name) {
  return op_multi(op_type, inputs, 1, std::move(attributes), name).front();
}

std::vector<ValueId> ModelBuilder::op_multi(const std::string& op_type,
                                            const std::vector<ValueId>& inputs, size_t num_outputs,
                                            Attributes attributes, const std::string& name) {
  Node node;
  node.op_type = op_type;
  node.name = name.empty() ? op_type + "_" + std::to_string(counter_++) : name;
  node.inputs = inputs;
  node.attributes = std::move(attributes);
  for (size_t i = 0; i < num_outputs; ++i)
    node.outputs.push_back(model_->add_value(
        {num_outputs == 1 ? node.name : node.name + ":" + std::to_string(i), {}, {}}));
  model_->add_node(std::move(node));
  return model_->nodes().back().outputs;
}

void ModelBuilder::output(ValueId value, const std::string& name) {
  if (!name.empty()) model_->rename_value(value, name);
  model_->add_output(value);
}

std::shared_ptr<Model> ModelBuilder::build() {
  model_->validate();
  return model_;
}

}  // namespace troupe
