#include "troupe/model.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include "engine/ops/op_schema.hpp"
#include "troupe/error.hpp"

namespace troupe {

std::optional<ValueId> Model::find_value(const std::string& name) const {
  auto it = value_by_name_.find(name);
  if (it == value_by_name_.end()) return std::nullopt;
  return it->second;
}

std::optional<size_t> Model::find_node(const std::string& name) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].name == name) return i;
  return std::nullopt;
}

ValueId Model::add_value(ValueInfo info) {
  if (info.name.empty()) info.name = "value_" + std::to_string(values_.size());
  if (value_by_name_.count(info.name))
    throw ModelError("model '" + name_ + "': duplicate value name '" + info.name + "'");
  auto id = static_cast<ValueId>(values_.size());
  value_by_name_[info.name] = id;
  values_.push_back(std::move(info));
  return id;
}

ValueId Model::add_input(const std::string& name, ElementType type, const Shape& shape) {
  if (type == ElementType::undefined)
    throw ModelError("model input '" + name + "' has undefined element type");
  ValueId id = add_value({name, type, shape});
  inputs_.push_back(id);
  return id;
}

ValueId Model::add_constant(const std::string& name, Tensor data) {
  if (data.empty()) throw ModelError("constant '" + name + "' has no data");
  ValueId id = add_value({name, data.element_type(), data.shape()});
  constants_[id] = data.contiguous();
  return id;
}

void Model::set_constant(ValueId id, Tensor data) {
  ValueInfo& v = value(id);
  v.type = data.element_type();
  v.shape = data.shape();
  constants_[id] = data.contiguous();
}

size_t Model::add_node(Node node) {
  if (node.name.empty()) node.name = node.op_type + "_" + std::to_string(nodes_.size());
  for (ValueId v : node.inputs)
    if (v != no_value && (v < 0 || static_cast<size_t>(v) >= values_.size()))
      throw ModelError("node '" + node.name + "' refers to unknown value id " + std::to_string(v));
  for (ValueId v : node.outputs)
    if (v < 0 || static_cast<size_t>(v) >= values_.size())
      throw ModelError("node '" + node.name + "' outputs unknown value id " + std::to_string(v));
  nodes_.push_back(std::move(node));
  return nodes_.size() - 1;
}

void Model::add_output(ValueId id) {
  if (id < 0 || static_cast<size_t>(id) >= values_.size())
    throw ModelError("model '" + name_ + "': output refers to unknown value id " +
                     std::to_string(id));
  outputs_.push_back(id);
}

void Model::rename_value(ValueId id, const std::string& name) {
  ValueInfo& v = value(id);
  if (v.name == name) return;
  if (value_by_name_.count(name))
    throw ModelError("model '" + name_ + "': duplicate value name '" + name + "'");
  value_by_name_.erase(v.name);
  v.name = name;
  value_by_name_[name] = id;
}

namespace {

// Whether a value's byte size (when its shape is static) fits int64: a shape from a file may
// multiply past it and wrap to a small size, which every later allocation would then trust.
bool byte_size_fits(const ValueInfo& value) {
  int64_t bytes = static_cast<int64_t>(std::max<size_t>(element_size(value.type), 1));
  for (int64_t d : value.shape.dims())
    if (d > 0 && __builtin_mul_overflow(bytes, d, &bytes)) return false;
  return true;
}

// String elements are objects: only kernels written for them may read or write them (a kernel
// copying bytes would duplicate their pointers). These ops have such kernels.
bool takes_strings(const std::string& op_type) {
  static const std::set<std::string> ops = {"Identity",  "Reshape", "Flatten",  "Squeeze",
                                            "Unsqueeze", "Cast",    "CastLike", "StringNormalizer"};
  return ops.count(op_type) != 0;
}

void check_string_values(const Node& node, const std::vector<ValueInfo>& inputs,
                         const std::vector<ValueInfo>& outputs) {
  const auto refuse = [&](const char* kind, const ValueInfo& value) {
    if (takes_strings(node.op_type)) return;
    throw UnsupportedOperation(node.op_type + " node '" + node.name + "': " + kind + " '" +
                               value.name + "' holds strings, which troupe passes only through " +
                               "Identity, Reshape, Flatten, Squeeze, Unsqueeze, Cast, CastLike " +
                               "and StringNormalizer");
  };
  for (const ValueInfo& in : inputs)
    if (in.type == ElementType::string) refuse("input", in);
  for (const ValueInfo& out : outputs)
    if (out.type == ElementType::string) refuse("output", out);
}

}  // namespace

void Model::validate() {
  const size_t n = nodes_.size();
  std::vector<int> producer(values_.size(), -1);
  std::set<std::string> node_names;
  for (size_t i = 0; i < n; ++i) {
    const Node& node = nodes_[i];
    if (!node_names.insert(node.name).second)
      throw ModelError("model '" + name_ + "': duplicate node name '" + node.name + "'");
    for (ValueId out : node.outputs) {
      if (producer[out] != -1)
        throw ModelError("node '" + node.name + "': value '" + values_[out].name +
                         "' is already produced by node '" + nodes_[producer[out]].name + "'");
      if (is_constant(out) || std::find(inputs_.begin(), inputs_.end(), out) != inputs_.end())
        throw ModelError("node '" + node.name + "' writes model input or constant '" +
                         values_[out].name + "'");
      producer[out] = static_cast<int>(i);
    }
  }
  std::vector<bool> available(values_.size(), false);
  for (ValueId id : inputs_) {
    available[id] = true;
    if (!byte_size_fits(values_[id]))
      throw ModelError("model '" + name_ + "': input '" + values_[id].name + "' " +
                       values_[id].shape.to_string() + " has more bytes than int64 can count");
  }
  for (const auto& [id, tensor] : constants_) available[id] = true;

  // Kahn's algorithm over node dependencies; the original order breaks ties, so a model that is
  // already sorted keeps its order.
  std::vector<int> pending(n, 0);
  std::vector<std::vector<size_t>> consumers(n);
  for (size_t i = 0; i < n; ++i) {
    std::set<int> deps;
    for (ValueId in : nodes_[i].inputs) {
      if (in == no_value || available[in]) continue;
      if (producer[in] == -1)
        throw ModelError("node '" + nodes_[i].name + "' (" + nodes_[i].op_type + "): input '" +
                         values_[in].name + "' is neither a model input, a constant nor produced " +
                         "by any node");
      deps.insert(producer[in]);
    }
    pending[i] = static_cast<int>(deps.size());
    for (int d : deps) consumers[d].push_back(i);
  }
  std::set<size_t> ready;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.insert(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (size_t c : consumers[i])
      if (--pending[c] == 0) ready.insert(c);
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i)
      if (pending[i] > 0)
        throw ModelError("node '" + nodes_[i].name + "' (" + nodes_[i].op_type +
                         ") is part of a cycle");
  }
  std::vector<Node> sorted;
  sorted.reserve(n);
  for (size_t i : order) sorted.push_back(std::move(nodes_[i]));
  nodes_ = std::move(sorted);

  const auto& schemas = OpSchemaRegistry::instance();
  // Computed shapes known in part (Shape of a dynamic input and what is built from it).
  std::map<ValueId, PartialInts> partial_values;
  for (const Node& node : nodes_) {
    const OpSchema* schema = schemas.find(node.op_type);
    if (!schema)
      throw UnsupportedOperation("node '" + node.name + "': unknown op type '" + node.op_type +
                                 "'");
    const std::string where = node.op_type + " node '" + node.name + "'";
    if (node.inputs.size() < schema->min_inputs || node.inputs.size() > schema->max_inputs)
      throw ModelError(where + ": takes " + std::to_string(schema->min_inputs) + ".." +
                       std::to_string(schema->max_inputs) + " inputs, has " +
                       std::to_string(node.inputs.size()));
    if (node.outputs.size() < schema->min_outputs || node.outputs.size() > schema->max_outputs)
      throw ModelError(where + ": has " + std::to_string(schema->min_outputs) + ".." +
                       std::to_string(schema->max_outputs) + " outputs, given " +
                       std::to_string(node.outputs.size()));
    ShapeInferContext ctx{node, {}, {}};
    for (ValueId in : node.inputs) {
      if (in == no_value) {
        ctx.inputs.emplace_back();
        ctx.constant_inputs.push_back(nullptr);
      } else {
        ctx.inputs.push_back(values_[in]);
        auto c = constants_.find(in);
        ctx.constant_inputs.push_back(c == constants_.end() ? nullptr : &c->second);
      }
      auto p = in == no_value ? partial_values.end() : partial_values.find(in);
      ctx.partial_inputs.push_back(p == partial_values.end() ? nullptr : &p->second);
    }
    std::vector<ValueInfo> inferred;
    try {
      inferred = schema->infer(ctx);
    } catch (const ModelError&) {
      throw;
    } catch (const std::exception& e) {
      throw ModelError(where + ": " + e.what());
    }
    if (inferred.size() < node.outputs.size())
      throw ModelError(where + ": shape inference produced " + std::to_string(inferred.size()) +
                       " outputs, node has " + std::to_string(node.outputs.size()));
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      ValueInfo& out = values_[node.outputs[o]];
      out.type = inferred[o].type;
      out.shape = inferred[o].shape;
      if (!byte_size_fits(out))
        throw ModelError(where + ": output '" + out.name + "' " + out.shape.to_string() +
                         " has more bytes than int64 can count");
    }
    std::vector<ValueInfo> produced;
    for (ValueId out : node.outputs)
      if (out != no_value) produced.push_back(values_[out]);
    check_string_values(node, ctx.inputs, produced);
    if (node.outputs.size() == 1 && node.outputs[0] != no_value)
      if (auto partial = infer_partial_value(ctx, inferred[0]))
        partial_values[node.outputs[0]] = std::move(*partial);
  }
  if (outputs_.empty()) throw ModelError("model '" + name_ + "' has no outputs");
  for (ValueId out : outputs_)
    if (!available[out] && producer[out] == -1)
      throw ModelError("model output '" + values_[out].name + "' is never produced");
}

}  // namespace troupe
