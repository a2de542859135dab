// Schemas of the matrix products: MatMul (numpy matmul semantics) and Gemm.

#include <string>
#include <vector>

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
  const std::vector<int64_t> b_dims = b.rank() == 1 ? std::vector<int64_t>{b[0], 1} : b.dims();
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

}  // namespace

void register_linear_algebra_ops(OpSchemaRegistry& registry) {
  // One more input each for the residual of a fused sum, and MatMul's fused bias before it
  // (engine/ops/fused_post_ops.hpp).
  registry.add(OpSchema{"MatMul", 2, 4, 1, 1, infer_matmul});
  registry.add(OpSchema{"Gemm", 2, 4, 1, 1, infer_gemm});
}

}  // namespace troupe
