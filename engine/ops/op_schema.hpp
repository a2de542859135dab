#pragma once

#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "troupe/error.hpp"
#include "troupe/model.hpp"

namespace troupe {

/// The values of a small integer tensor (a shape being computed) as far as shape inference knows
/// them: std::nullopt for an entry known only at run time. Shape(x) of an x of shape [?,3,8,8] is
/// {nullopt, 3, 8, 8}; a Reshape whose target is built from it still knows three of its dimensions.
using PartialInts = std::vector<std::optional<int64_t>>;

/// What shape inference sees of one node: its attributes and its inputs' types and shapes, plus
/// the data of inputs that are constants (Reshape's target shape, Slice's starts, ...).
struct ShapeInferContext {
  const Node& node;
  std::vector<ValueInfo> inputs;               // ValueInfo{} for an omitted optional input
  std::vector<const Tensor*> constant_inputs;  // nullptr where the input is not a constant
  /// Per input, its partially known values (a computed shape), or nullptr; may be shorter than
  /// `inputs` (then the rest are unknown).
  std::vector<const PartialInts*> partial_inputs = {};

  size_t num_inputs() const { return inputs.size(); }
  bool has_input(size_t i) const {
    return i < inputs.size() && inputs[i].type != ElementType::undefined;
  }
  const Shape& shape(size_t i) const { return inputs.at(i).shape; }
  ElementType type(size_t i) const { return inputs.at(i).type; }
  const Tensor* constant(size_t i) const {
    return i < constant_inputs.size() ? constant_inputs[i] : nullptr;
  }
  const PartialInts* partial(size_t i) const {
    return i < partial_inputs.size() ? partial_inputs[i] : nullptr;
  }
  /// Throws ModelError "<op_type> node '<name>': <message>".
  [[noreturn]] void fail(const std::string& message) const;
};

/// Output types and shapes of a node, in output order.
using ShapeInferFn = std::function<std::vector<ValueInfo>(const ShapeInferContext&)>;

/// The definition of an op type: arity and shape/type inference. Kernels are registered separately
/// (kernels/kernel_registry.hpp); an op is "known" when it has a schema and "supported on CPU" when
/// some backend also has a kernel for it.
struct OpSchema {
  std::string op_type;
  size_t min_inputs = 1;
  size_t max_inputs = 1;
  size_t min_outputs = 1;
  size_t max_outputs = 1;
  ShapeInferFn infer;
};

/// The max_inputs or max_outputs of a variadic op (Concat, Sum, If, Loop, ...): no bound.
inline constexpr size_t unbounded = std::numeric_limits<size_t>::max();

/// The partially known values of a node's single output when it is a small integer list computed
/// from shapes (Shape, Gather, Concat, Slice, Unsqueeze, Cast, integer arithmetic, Equal, Where on
/// such lists); std::nullopt when nothing is known. `output` is the output's inferred type and
/// shape. Model::validate tracks these so that a Reshape, Expand, ConstantOfShape, Tile or Resize
/// whose target is computed from a dynamic input's shape still knows its static dimensions.
std::optional<PartialInts> infer_partial_value(const ShapeInferContext& ctx,
                                               const ValueInfo& output);

/// All op schemas by op type. The built-in ones are registered on first use.
class OpSchemaRegistry {
 public:
  static OpSchemaRegistry& instance();

  void add(OpSchema schema);
  /// nullptr when unknown.
  const OpSchema* find(const std::string& op_type) const;
  std::vector<std::string> op_types() const;

 private:
  OpSchemaRegistry();
  std::map<std::string, OpSchema> schemas_;
};

/// Registration of the built-in op families (engine/ops/*.cpp), called by the registry.
void register_elementwise_ops(OpSchemaRegistry& registry);
void register_linear_algebra_ops(OpSchemaRegistry& registry);
void register_convolution_ops(OpSchemaRegistry& registry);
void register_pooling_ops(OpSchemaRegistry& registry);
void register_normalization_ops(OpSchemaRegistry& registry);
void register_shape_ops(OpSchemaRegistry& registry);
void register_reduction_ops(OpSchemaRegistry& registry);
void register_resize_ops(OpSchemaRegistry& registry);
void register_recurrent_ops(OpSchemaRegistry& registry);
void register_quantization_ops(OpSchemaRegistry& registry);
void register_loss_ops(OpSchemaRegistry& registry);
void register_selection_ops(OpSchemaRegistry& registry);
void register_control_flow_ops(OpSchemaRegistry& registry);
void register_signal_ops(OpSchemaRegistry& registry);
void register_sampling_ops(OpSchemaRegistry& registry);
void register_training_ops(OpSchemaRegistry& registry);
void register_text_ops(OpSchemaRegistry& registry);
void register_attention_ops(OpSchemaRegistry& registry);

/// The ONNX domain of the optimizers (Adagrad, Momentum, Adam), whose ops troupe implements.
inline constexpr const char* onnx_training_domain = "ai.onnx.preview.training";
/// The op type troupe gives an ONNX op of `domain`: the bare op type in the default domain ("" or
/// "ai.onnx"), else "<domain>::<op_type>" ("ai.onnx.preview.training::Adam"). Schemas and kernels
/// of other domains are registered under such names, so they can never collide with a
/// default-domain op of the same name, and a node of a domain troupe does not know finds no schema.
std::string qualified_op_type(const std::string& domain, const std::string& op_type);

/// numpy-style broadcast of two shapes; throws via ctx.fail when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const ShapeInferContext& ctx);

}  // namespace troupe
