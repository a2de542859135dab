// Schemas of the matrix products: MatMul (numpy matmul semantics), Gemm and Einsum; and Det.

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops/einsum.hpp"
#include "engine/ops/fused_post_ops.hpp"
#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"

namespace troupe {

using infer::TypeClass;

namespace {

bool dims_conflict(int64_t a, int64_t b) {
  return a != b && a != Shape::dynamic && b != Shape::dynamic;
}

std::vector<ValueInfo> infer_matmul(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::numeric);
  infer::require_same_type(ctx, 0, 1);
  const Shape& a = ctx.shape(0);
  const Shape& b = ctx.shape(1);
  if (a.rank() == 0 || b.rank() == 0)
    ctx.fail("MatMul needs inputs of rank >= 1, got shapes " + a.to_string() + " and " +
             b.to_string());

  // A 1-D A is a row vector [1,K] and a 1-D B a column vector [K,1]; the added dimension is
  // dropped from the result.
  const std::vector<int64_t> a_dims = a.rank() == 1 ? std::vector<int64_t>{1, a[0]} : a.dims();
  std::vector<int64_t> b_dims = b.rank() == 1 ? std::vector<int64_t>{b[0], 1} : b.dims();
  if (fused::transposes_b(ctx.node)) {
    if (b.rank() < 2)
      ctx.fail("attribute 'fused_transpose_b' needs B of rank >= 2, got " + b.to_string());
    std::swap(b_dims[b_dims.size() - 1], b_dims[b_dims.size() - 2]);
  }
  const int64_t k_a = a_dims[a_dims.size() - 1];
  const int64_t k_b = b_dims[b_dims.size() - 2];
  if (dims_conflict(k_a, k_b))
    ctx.fail("inner dimensions do not match: A " + a.to_string() + " has K=" + std::to_string(k_a) +
             " but B " + b.to_string() + " has K=" + std::to_string(k_b));

  const Shape a_batch(std::vector<int64_t>(a_dims.begin(), a_dims.end() - 2));
  const Shape b_batch(std::vector<int64_t>(b_dims.begin(), b_dims.end() - 2));
  std::vector<int64_t> out = broadcast_shapes(a_batch, b_batch, ctx).dims();
  if (a.rank() != 1) out.push_back(a_dims[a_dims.size() - 2]);
  if (b.rank() != 1) out.push_back(b_dims[b_dims.size() - 1]);
  const ValueInfo result = infer::value_info(ctx.type(0), Shape(std::move(out)));
  fused::check_post_ops(ctx, 2, result);
  return {result};
}

std::vector<ValueInfo> infer_gemm(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::numeric);
  infer::require_same_type(ctx, 0, 1);
  infer::require_rank(ctx, 0, 2);
  infer::require_rank(ctx, 1, 2);
  const auto& attrs = ctx.node.attributes;
  const bool trans_a = attrs.get_int_or("transA", 0) != 0;
  const bool trans_b = attrs.get_int_or("transB", 0) != 0;
  const Shape& a = ctx.shape(0);
  const Shape& b = ctx.shape(1);
  const int64_t m = trans_a ? a[1] : a[0];
  const int64_t k_a = trans_a ? a[0] : a[1];
  const int64_t k_b = trans_b ? b[1] : b[0];
  const int64_t n = trans_b ? b[0] : b[1];
  if (dims_conflict(k_a, k_b))
    ctx.fail("inner dimensions do not match: A " + a.to_string() +
             (trans_a ? " (transposed)" : "") + " has K=" + std::to_string(k_a) + " but B " +
             b.to_string() + (trans_b ? " (transposed)" : "") + " has K=" + std::to_string(k_b));
  const Shape out{m, n};

  if (ctx.has_input(2)) {
    infer::require_same_type(ctx, 0, 2);
    // C broadcasts to [M,N] (unidirectionally).
    const Shape& c = ctx.shape(2);
    if (c.rank() > 2)
      ctx.fail("C must have rank <= 2 to broadcast to [M,N], got shape " + c.to_string());
    for (size_t i = 0; i < c.rank(); ++i) {
      const int64_t dc = c[i];
      const int64_t d_out = out[2 - c.rank() + i];
      if (dc != 1 && dims_conflict(dc, d_out))
        ctx.fail("C shape " + c.to_string() + " does not broadcast to [M,N] = " + out.to_string());
    }
  }
  const ValueInfo result = infer::value_info(ctx.type(0), out);
  fused::check_post_ops(ctx, 3, result);
  return {result};
}

// Einsum(equation, inputs...): the output dimensions are those of the equation's output labels;
// a letter's dimensions must agree wherever it appears, and those under '...' broadcast.
std::vector<ValueInfo> infer_einsum(const ShapeInferContext& ctx) {
  if (!ctx.node.attributes.has("equation")) ctx.fail("missing required attribute 'equation'");
  const std::string equation = ctx.node.attributes.get_string("equation");
  infer::require_type(ctx, 0, TypeClass::numeric);
  std::vector<size_t> ranks;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    infer::require_same_type(ctx, 0, i);
    ranks.push_back(ctx.shape(i).rank());
  }
  const einsum::Equation eq = einsum::parse(equation, ranks);
  if (!eq.error.empty()) ctx.fail(eq.error);

  // Per label, its size: unset, or a size (dynamic when no input knows it).
  std::vector<std::optional<int64_t>> size(einsum::ellipsis_label + eq.ellipsis_rank);
  for (size_t i = 0; i < eq.inputs.size(); ++i) {
    for (size_t d = 0; d < eq.inputs[i].size(); ++d) {
      const int label = eq.inputs[i][d];
      const int64_t dim = ctx.shape(i)[d];
      auto& known = size[static_cast<size_t>(label)];
      if (!known || *known == Shape::dynamic) {
        // A broadcast dimension of 1 says nothing about the others.
        if (!(known && label >= einsum::ellipsis_label && dim == 1)) known = dim;
      } else if (dim != Shape::dynamic && dim != *known) {
        if (label >= einsum::ellipsis_label && (dim == 1 || *known == 1)) {
          known = std::max(dim, *known);
        } else {
          ctx.fail("in equation '" + equation + "', " +
                   (label >= einsum::ellipsis_label
                        ? std::string("the dimensions under '...' do not broadcast")
                        : "label '" + einsum::label_name(label) + "' has size " +
                              std::to_string(*known) + " in one place and " + std::to_string(dim) +
                              " in another") +
                   " (input " + std::to_string(i) + " has shape " + ctx.shape(i).to_string() + ")");
        }
      }
    }
  }
  std::vector<int64_t> out;
  for (int label : eq.output) out.push_back(*size[static_cast<size_t>(label)]);
  return {infer::value_info(ctx.type(0), Shape(std::move(out)))};
}

// Det(X): X is [*, M, M]; the output is [*], one determinant per matrix.
std::vector<ValueInfo> infer_det(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::floating);
  const Shape& x = ctx.shape(0);
  if (x.rank() < 2) ctx.fail("input must have shape [*, M, M], got " + x.to_string());
  if (dims_conflict(x[x.rank() - 2], x[x.rank() - 1]))
    ctx.fail("input " + x.to_string() + " is not a batch of square matrices");
  return {infer::value_info(ctx.type(0), Shape(std::vector<int64_t>(x.begin(), x.end() - 2)))};
}

}  // namespace

void register_linear_algebra_ops(OpSchemaRegistry& registry) {
  // One more input each for the residual of a fused sum, and MatMul's fused bias before it
  // (engine/ops/fused_post_ops.hpp).
  registry.add(OpSchema{"MatMul", 2, 4, 1, 1, infer_matmul});
  registry.add(OpSchema{"Gemm", 2, 4, 1, 1, infer_gemm});
  registry.add(OpSchema{"Einsum", 1, std::numeric_limits<size_t>::max(), 1, 1, infer_einsum});
  registry.add(OpSchema{"Det", 1, 1, 1, 1, infer_det});
}

}  // namespace troupe
