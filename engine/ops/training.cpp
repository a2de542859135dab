// Schemas of the optimizers of ONNX domain "ai.onnx.preview.training" (opset 1): Adagrad,
// Momentum and Adam. Each updates n tensors at once: inputs R (learning rate), T (update count),
// then n X (the tensors), n G (their gradients) and n of each optimizer state (Adagrad: H,
// Momentum: V, Adam: V then H); outputs the n new X, then the n new values of each state. They are
// registered as "ai.onnx.preview.training::<Name>" (qualified_op_type), the op type the ONNX reader
// gives these nodes, so that they cannot collide with a default-domain op.
#include <string>
#include <vector>

#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"

namespace troupe {

namespace {

using infer::TypeClass;

// A scalar input (R or T): ONNX declares a tensor; the optimizers read its one value.
void check_single_value(const ShapeInferContext& ctx, size_t i, const std::string& what) {
  const Shape& shape = ctx.shape(i);
  if (shape.is_static() && shape.element_count() != 1)
    ctx.fail(infer::input_label(ctx, i) + " (" + what + ") has shape " + shape.to_string() +
             ", expected a single value");
}

// `states` is the number of optimizer states per tensor (Adagrad and Momentum 1, Adam 2): the
// inputs after R and T are n groups of 2 + states, the outputs n groups of 1 + states.
std::vector<ValueInfo> infer_optimizer(const ShapeInferContext& ctx, size_t states) {
  const size_t per_tensor = 2 + states;
  const size_t variadic = ctx.num_inputs() - 2;
  if (variadic == 0 || variadic % per_tensor != 0)
    ctx.fail("expected inputs R, T and n each of X, G" +
             std::string(states == 1 ? " and the state" : " and the two states") + " (2 + " +
             std::to_string(per_tensor) + "n inputs), got " + std::to_string(ctx.num_inputs()));
  const size_t n = variadic / per_tensor;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (!ctx.has_input(i)) ctx.fail(infer::input_label(ctx, i) + " is omitted; none is optional");
  infer::require_type(ctx, 0, TypeClass::floating);
  check_single_value(ctx, 0, "the learning rate R");
  if (ctx.type(1) != ElementType::i64)
    ctx.fail(infer::input_label(ctx, 1) + " (the update count T) has element type " +
             std::string(to_string(ctx.type(1))) + ", expected i64");
  check_single_value(ctx, 1, "the update count T");
  // Input 2 + g * n + k is the g-th of X, G, states of tensor k; all of a tensor's agree.
  for (size_t k = 0; k < n; ++k) {
    const size_t x = 2 + k;
    infer::require_type(ctx, x, TypeClass::floating);
    for (size_t g = 1; g < per_tensor; ++g) {
      const size_t other = 2 + g * n + k;
      infer::require_same_type(ctx, x, other);
      const Shape& a = ctx.shape(x);
      const Shape& b = ctx.shape(other);
      bool same = a.rank() == b.rank();
      for (size_t d = 0; same && d < a.rank(); ++d)
        same = a[d] == b[d] || a[d] == Shape::dynamic || b[d] == Shape::dynamic;
      if (!same)
        ctx.fail(infer::input_label(ctx, other) + " has shape " + b.to_string() + " but " +
                 infer::input_label(ctx, x) + " (the tensor it belongs to) has " + a.to_string() +
                 "; they must match");
    }
  }
  // Outputs may be left off at the end (the reader drops omitted trailing outputs).
  const size_t expected_outputs = (1 + states) * n;
  if (ctx.node.outputs.size() > expected_outputs)
    ctx.fail("has " + std::to_string(ctx.node.outputs.size()) + " outputs, expected at most " +
             std::to_string(expected_outputs) + " (the new X and states of " + std::to_string(n) +
             " tensor(s))");
  // Output g * n + k is the new X (g = 0) or the new state g of tensor k: input 2 + (g + 1) n + k
  // for a state, whose type and shape it keeps.
  std::vector<ValueInfo> outputs;
  for (size_t o = 0; o < ctx.node.outputs.size(); ++o) {
    const size_t g = o / n;
    const size_t k = o % n;
    const size_t source = g == 0 ? 2 + k : 2 + (g + 1) * n + k;
    outputs.push_back(infer::value_info(ctx.type(source), ctx.shape(source)));
  }
  return outputs;
}

// Attributes without a default (Momentum's all) must be given.
void require_attributes(const ShapeInferContext& ctx, const std::vector<std::string>& names) {
  for (const std::string& name : names)
    if (!ctx.node.attributes.has(name)) ctx.fail("attribute '" + name + "' is required");
}

std::vector<ValueInfo> infer_adagrad(const ShapeInferContext& ctx) {
  return infer_optimizer(ctx, 1);
}

std::vector<ValueInfo> infer_momentum(const ShapeInferContext& ctx) {
  require_attributes(ctx, {"alpha", "beta", "mode", "norm_coefficient"});
  const std::string mode = ctx.node.attributes.get_string("mode");
  if (mode != "standard" && mode != "nesterov")
    ctx.fail("attribute mode is '" + mode + "', expected standard or nesterov");
  return infer_optimizer(ctx, 1);
}

std::vector<ValueInfo> infer_adam(const ShapeInferContext& ctx) {
  return infer_optimizer(ctx, 2);
}

}  // namespace

void register_training_ops(OpSchemaRegistry& registry) {
  const auto name = [](const char* op) { return qualified_op_type(onnx_training_domain, op); };
  registry.add(OpSchema{name("Adagrad"), 5, unbounded, 1, unbounded, infer_adagrad});
  registry.add(OpSchema{name("Momentum"), 5, unbounded, 1, unbounded, infer_momentum});
  registry.add(OpSchema{name("Adam"), 6, unbounded, 1, unbounded, infer_adam});
}

}  // namespace troupe
