// Schemas of the loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 12/13).
// Inference graphs keep them when a model is exported with its loss (an evaluation graph that
// reports its own loss), so they are computed like any other op.
#include <string>
#include <vector>

#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"

namespace troupe {

namespace {

using infer::TypeClass;

// Both losses take scores [N, C, d1, ..., dk], targets [N, d1, ..., dk] and an optional weight
// [C]; the loss has the targets' shape with reduction "none", else it is a scalar.
ValueInfo infer_loss(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::floating);
  infer::require_type(ctx, 1, TypeClass::index);
  const std::string reduction = ctx.node.attributes.get_string_or("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    ctx.fail("attribute reduction is '" + reduction + "', expected none, sum or mean");
  const Shape& scores = ctx.shape(0);
  const Shape& target = ctx.shape(1);
  if (scores.rank() < 2)
    ctx.fail(infer::input_label(ctx, 0) + " must have shape [N, C, d1, ...], got " +
             scores.to_string());
  if (target.rank() != scores.rank() - 1)
    ctx.fail(infer::input_label(ctx, 1) + " " + target.to_string() + " must have rank " +
             std::to_string(scores.rank() - 1) + " (the scores " + scores.to_string() +
             " without the class dimension)");
  for (size_t d = 0; d < target.rank(); ++d) {
    const int64_t expected = scores[d == 0 ? 0 : d + 1];
    if (target[d] >= 0 && expected >= 0 && target[d] != expected)
      ctx.fail(infer::input_label(ctx, 1) + " " + target.to_string() +
               " does not match the scores " + scores.to_string());
  }
  if (ctx.has_input(2)) {
    infer::require_same_type(ctx, 0, 2);
    const Shape& weight = ctx.shape(2);
    if (weight.rank() != 1 || (weight[0] >= 0 && scores[1] >= 0 && weight[0] != scores[1]))
      ctx.fail(infer::input_label(ctx, 2) + " " + weight.to_string() +
               " must have one weight per class (" + std::to_string(scores[1]) + ")");
  }
  return infer::value_info(ctx.type(0), reduction == "none" ? target : Shape{});
}

std::vector<ValueInfo> infer_nll_loss(const ShapeInferContext& ctx) {
  return {infer_loss(ctx)};
}

// The optional second output is the log-softmax of the scores.
std::vector<ValueInfo> infer_softmax_cross_entropy(const ShapeInferContext& ctx) {
  std::vector<ValueInfo> outs{infer_loss(ctx)};
  if (ctx.node.outputs.size() > 1) outs.push_back(infer::value_info(ctx.type(0), ctx.shape(0)));
  return outs;
}

}  // namespace

void register_loss_ops(OpSchemaRegistry& registry) {
  registry.add(OpSchema{"NegativeLogLikelihoodLoss", 2, 3, 1, 1, infer_nll_loss});
  registry.add(OpSchema{"SoftmaxCrossEntropyLoss", 2, 3, 1, 2, infer_softmax_cross_entropy});
}

}  // namespace troupe
