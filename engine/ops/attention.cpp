// The schema of ScaledDotProductAttention (engine/ops/attention.hpp) and how its operands are read.
#include "engine/ops/attention.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"
#include "troupe/error.hpp"

namespace troupe {

namespace attention {

std::vector<int64_t> perm(const Node& node, size_t i) {
  return node.attributes.has(perm_attributes[i]) ? node.attributes.get_ints(perm_attributes[i])
                                                 : std::vector<int64_t>{};
}

double scale(const Node& node) {
  return node.attributes.get_float_or("scale", 1.0);
}

void check_perm(const Node& node, const char* attribute, const std::vector<int64_t>& p,
                size_t rank) {
  if (p.empty()) return;
  std::vector<bool> seen(rank, false);
  bool valid = p.size() == rank;
  for (int64_t axis : p) {
    if (!valid || axis < 0 || axis >= static_cast<int64_t>(rank) || seen[axis]) {
      valid = false;
      break;
    }
    seen[axis] = true;
  }
  if (!valid)
    throw ModelError(std::string(op_type) + " node '" + node.name + "': attribute " + attribute +
                     " is not a permutation of " + std::to_string(rank) + " axes");
}

std::vector<int64_t> output_dims(const Node& node, const std::vector<int64_t>& logical) {
  const std::vector<int64_t> p = perm(node, 3);
  check_perm(node, perm_attributes[3], p, logical.size());
  if (p.empty()) return logical;
  std::vector<int64_t> stored;
  for (int64_t axis : p) stored.push_back(logical[axis]);
  return stored;
}

Operand operand(const Node& node, size_t i, const std::vector<int64_t>& stored) {
  const size_t rank = stored.size();
  const std::vector<int64_t> strides = row_major_strides(Shape(stored));
  const std::vector<int64_t> p = perm(node, i);
  if (p.empty()) return {stored, strides};
  check_perm(node, perm_attributes[i], p, rank);
  Operand out;
  for (int64_t axis : p) {
    out.dims.push_back(stored[axis]);
    out.strides.push_back(strides[axis]);
  }
  return out;
}

namespace {

[[noreturn]] void fail_run(const Node& node, const std::string& message) {
  throw ExecutionError(std::string(op_type) + " node '" + node.name + "': " + message);
}

std::string text(const std::vector<int64_t>& dims) {
  return Shape(dims).to_string();
}

}  // namespace

Geometry geometry(const Node& node, const std::vector<int64_t>& q, const std::vector<int64_t>& kt,
                  const std::vector<int64_t>& v, const std::vector<int64_t>* mask) {
  Geometry g;
  g.q = operand(node, 0, q);
  g.kt = operand(node, 1, kt);
  g.v = operand(node, 2, v);
  const Operand* ops[3] = {&g.q, &g.kt, &g.v};
  for (size_t i = 0; i < 3; ++i)
    if (ops[i]->dims.size() < 2)
      fail_run(node,
               std::string(operand_names[i]) + " must have rank >= 2, got " + text(ops[i]->dims));
  auto last = [](const Operand& o, size_t from_end) {
    return o.dims[o.dims.size() - 1 - from_end];
  };
  g.m = last(g.q, 1);
  g.k = last(g.q, 0);
  g.n = last(g.kt, 0);
  g.d = last(g.v, 0);
  if (last(g.kt, 1) != g.k || last(g.v, 1) != g.n)
    fail_run(node, "operands Q " + text(g.q.dims) + ", Kt " + text(g.kt.dims) + " and V " +
                       text(g.v.dims) + " do not chain as [M, K] x [K, N] x [N, D]");
  size_t rank = 0;
  for (const Operand* o : ops) rank = std::max(rank, o->dims.size() - 2);
  g.batch_dims.assign(rank, 1);
  for (const Operand* o : ops) {
    const size_t lead = rank - (o->dims.size() - 2);
    for (size_t i = 0; i + 2 < o->dims.size(); ++i) {
      int64_t& out = g.batch_dims[lead + i];
      if (o->dims[i] != 1 && out != 1 && o->dims[i] != out)
        fail_run(node, "the batch dimensions of Q " + text(g.q.dims) + ", Kt " + text(g.kt.dims) +
                           " and V " + text(g.v.dims) + " do not broadcast");
      if (o->dims[i] != 1) out = o->dims[i];
    }
  }
  for (int64_t dim : g.batch_dims) g.batches *= dim;
  for (size_t i = 0; i < 3; ++i) {
    const Operand& o = *ops[i];
    const size_t lead = rank - (o.dims.size() - 2);
    g.batch_strides[i].assign(rank, 0);
    for (size_t j = 0; j + 2 < o.dims.size(); ++j)
      if (o.dims[j] != 1) g.batch_strides[i][lead + j] = o.strides[j];
  }
  g.batch_strides[3].assign(rank, 0);
  g.has_mask = mask != nullptr;
  if (mask) {
    std::vector<int64_t> scores = g.batch_dims;
    scores.push_back(g.m);
    scores.push_back(g.n);
    if (mask->size() > scores.size())
      fail_run(node, "mask " + text(*mask) + " does not broadcast to the scores " + text(scores));
    const std::vector<int64_t> strides = row_major_strides(Shape(*mask));
    std::vector<int64_t> aligned(scores.size(), 0);
    const size_t lead = scores.size() - mask->size();
    for (size_t i = 0; i < mask->size(); ++i) {
      const int64_t dim = (*mask)[i];
      if (dim != 1 && dim != scores[lead + i])
        fail_run(node, "mask " + text(*mask) + " does not broadcast to the scores " + text(scores));
      if (dim != 1) aligned[lead + i] = strides[i];
    }
    std::copy(aligned.begin(), aligned.begin() + static_cast<std::ptrdiff_t>(rank),
              g.batch_strides[3].begin());
    g.mask_row = aligned[rank];
    g.mask_col = aligned[rank + 1];
  }
  // The output: Y's dims stored permuted by y_perm, its strides back in Y's order.
  std::vector<int64_t> y = g.batch_dims;
  y.push_back(g.m);
  y.push_back(g.d);
  const std::vector<int64_t> stored_strides = row_major_strides(Shape(output_dims(node, y)));
  std::vector<int64_t> y_perm = perm(node, 3);
  std::vector<int64_t> y_strides(y.size());
  for (size_t i = 0; i < y.size(); ++i)
    y_strides[y_perm.empty() ? i : static_cast<size_t>(y_perm[i])] = stored_strides[i];
  g.batch_strides[4].assign(y_strides.begin(),
                            y_strides.begin() + static_cast<std::ptrdiff_t>(rank));
  g.y_row = y_strides[rank];
  g.y_col = y_strides[rank + 1];
  return g;
}

std::array<int64_t, 5> Geometry::offsets(int64_t b) const {
  std::array<int64_t, 5> out = {0, 0, 0, 0, 0};
  for (size_t i = batch_dims.size(); i-- > 0;) {
    const int64_t index = b % batch_dims[i];
    b /= batch_dims[i];
    for (size_t j = 0; j < 5; ++j) out[j] += index * batch_strides[j][i];
  }
  return out;
}

}  // namespace attention

namespace {

bool conflict(int64_t a, int64_t b) {
  return a >= 0 && b >= 0 && a != b;
}

std::vector<ValueInfo> infer_attention(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, infer::TypeClass::floating);
  for (size_t i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) infer::require_same_type(ctx, 0, i);
  attention::Operand ops[3];
  for (size_t i = 0; i < 3; ++i) {
    ops[i] = attention::operand(ctx.node, i, ctx.shape(i).dims());
    if (ops[i].dims.size() < 2)
      ctx.fail(std::string(attention::operand_names[i]) + " must have rank >= 2, got shape " +
               ctx.shape(i).to_string());
  }
  auto last = [](const attention::Operand& o, size_t from_end) {
    return o.dims[o.dims.size() - 1 - from_end];
  };
  const int64_t m = last(ops[0], 1), k = last(ops[0], 0);
  const int64_t n = last(ops[1], 0), d = last(ops[2], 0);
  if (conflict(k, last(ops[1], 1)) || conflict(n, last(ops[2], 1)))
    ctx.fail("operands Q " + Shape(ops[0].dims).to_string() + ", Kt " +
             Shape(ops[1].dims).to_string() + " and V " + Shape(ops[2].dims).to_string() +
             " do not chain as [M, K] x [K, N] x [N, D]");
  auto batch = [](const attention::Operand& o) {
    return Shape(std::vector<int64_t>(o.dims.begin(), o.dims.end() - 2));
  };
  const Shape batches =
      broadcast_shapes(broadcast_shapes(batch(ops[0]), batch(ops[1]), ctx), batch(ops[2]), ctx);
  if (ctx.has_input(3)) {
    std::vector<int64_t> scores = batches.dims();
    scores.push_back(m);
    scores.push_back(n);
    const Shape scores_shape(scores);
    const Shape& mask = ctx.shape(3);
    // The scores keep their shape: the mask broadcasts to them, never they to it.
    bool broadcasts = mask.rank() <= scores.size();
    for (size_t i = 0; broadcasts && i < mask.rank(); ++i) {
      const int64_t md = mask[i], sd = scores[scores.size() - mask.rank() + i];
      broadcasts = md < 0 || md == 1 || sd < 0 || md == sd;
    }
    if (!broadcasts)
      ctx.fail("mask " + mask.to_string() + " does not broadcast to the scores " +
               scores_shape.to_string());
  }
  std::vector<int64_t> y = batches.dims();
  y.push_back(m);
  y.push_back(d);
  return {infer::value_info(ctx.type(0), Shape(attention::output_dims(ctx.node, y)))};
}

}  // namespace

void register_attention_ops(OpSchemaRegistry& registry) {
  registry.add(OpSchema{attention::op_type, 3, 4, 1, 1, infer_attention});
}

}  // namespace troupe
