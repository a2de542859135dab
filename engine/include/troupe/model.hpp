#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "troupe/attributes.hpp"
#include "troupe/element_type.hpp"
#include "troupe/shape.hpp"
#include "troupe/tensor.hpp"

namespace troupe {

struct PrePostProcessing;

/// Index of a value (an edge of the graph) inside its Model.
using ValueId = int32_t;
/// Marks an omitted optional input of a node.
inline constexpr ValueId no_value = -1;

/// A named, typed, shaped edge: a model input, a constant, or a node output.
struct ValueInfo {
  std::string name;
  ElementType type = ElementType::undefined;
  Shape shape;
};

/// One operation of the graph.
struct Node {
  std::string name;
  std::string op_type;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  Attributes attributes;
};

/// A dataflow graph: model inputs (parameters), constants, nodes and model outputs (results).
/// Values are addressed by ValueId. Built with ModelBuilder or read from a file, then validated:
/// validate() orders the nodes topologically, checks every op and infers every value's type and
/// shape, throwing ModelError that names the offending node.
class Model {
 public:
  explicit Model(std::string name = "model") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  const std::vector<ValueInfo>& values() const { return values_; }
  const ValueInfo& value(ValueId id) const { return values_.at(static_cast<size_t>(id)); }
  ValueInfo& value(ValueId id) { return values_.at(static_cast<size_t>(id)); }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& nodes() { return nodes_; }
  /// Model inputs in order.
  const std::vector<ValueId>& inputs() const { return inputs_; }
  /// Model outputs in order.
  const std::vector<ValueId>& outputs() const { return outputs_; }
  /// Constant values (weights, initializers).
  const std::map<ValueId, Tensor>& constants() const { return constants_; }
  bool is_constant(ValueId id) const { return constants_.count(id) != 0; }

  /// Value by name, if any.
  std::optional<ValueId> find_value(const std::string& name) const;
  /// Index of a node by name, if any.
  std::optional<size_t> find_node(const std::string& name) const;

  /// Adds a value; its name must be unique.
  ValueId add_value(ValueInfo info);
  /// Adds a value that is a model input.
  ValueId add_input(const std::string& name, ElementType type, const Shape& shape);
  /// Adds a constant value holding `data` (type and shape taken from it). The model shares the
  /// tensor's memory: its contents must not change afterwards (compiled models pack constants
  /// once and share the packed copy between models compiled from the same memory).
  ValueId add_constant(const std::string& name, Tensor data);
  /// Replaces the data of an existing constant (or turns a value into a constant); the same rule
  /// as add_constant holds for `data`.
  void set_constant(ValueId id, Tensor data);
  /// Drops the data of constant `id`, keeping the value (its type and shape): it is no constant
  /// afterwards. A compiled model does so for constants its kernels hold packed copies of.
  void drop_constant(ValueId id) { constants_.erase(id); }
  /// Appends a node whose inputs and outputs are existing values (outputs made with add_value,
  /// their type and shape filled in by validate()). Returns the index of the node.
  size_t add_node(Node node);
  /// Marks a value as a model output.
  void add_output(ValueId id);
  /// Renames a value (must stay unique).
  void rename_value(ValueId id, const std::string& name);
  /// Replaces the whole node list (used by graph transformations; call validate() afterwards).
  void set_nodes(std::vector<Node> nodes) { nodes_ = std::move(nodes); }
  /// Replaces the model outputs.
  void set_outputs(std::vector<ValueId> outputs) { outputs_ = std::move(outputs); }

  /// Sorts nodes topologically, checks every node against its op schema and infers types and
  /// shapes of all node outputs. Throws ModelError / UnsupportedOperation naming the node.
  void validate();

  /// Deep copy (constants share memory, which is immutable once built).
  std::shared_ptr<Model> clone() const { return std::make_shared<Model>(*this); }

  /// Pre/postprocessing the stages run around the graph (see PrePostProcessor); null if none.
  const std::shared_ptr<const PrePostProcessing>& pre_post_processing() const { return ppp_; }
  void set_pre_post_processing(std::shared_ptr<const PrePostProcessing> ppp) {
    ppp_ = std::move(ppp);
  }

 private:
  std::string name_;
  std::vector<ValueInfo> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::map<ValueId, Tensor> constants_;
  std::map<std::string, ValueId> value_by_name_;
  std::shared_ptr<const PrePostProcessing> ppp_;
};

}  // namespace troupe
