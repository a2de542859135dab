// Fuses attention as transformers export it, MatMul(Q, Kt) [scale fused] -> [Add(mask)] ->
// Softmax(last axis) -> MatMul(., V), into one ScaledDotProductAttention node
// (engine/ops/attention.hpp), and absorbs a Transpose that alone feeds Q, Kt or V (heads split
// by Reshape + Transpose) when the operand keeps a contiguous axis sgemm can read in place.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/ops/attention.hpp"
#include "engine/ops/fused_post_ops.hpp"

namespace troupe::transformations {

namespace {

constexpr int64_t min_fused_keys = 96;

bool plain_matmul(const Node& node) {
  return is_op(node, "MatMul", 2) && !fused::has_bias(node) && !fused::has_sum(node) &&
         fused::activation(node).empty();
}

// Softmax along the last axis, at any opset (before 13 the axis coerces the input to 2-D, the
// same rows when it is the last one).
bool last_axis_softmax(const Model& model, const Node& softmax) {
  if (!is_op(softmax, "Softmax", 1)) return false;
  const auto rank = static_cast<int64_t>(model.value(softmax.inputs[0]).shape.rank());
  const bool before_13 = softmax.attributes.get_int_or("opset", 13) < 13;
  int64_t axis = softmax.attributes.get_int_or("axis", before_13 ? 1 : -1);
  if (axis < 0) axis += rank;
  return rank >= 2 && axis == rank - 1;
}

// A causal or padding mask applied as Where(cond, scores, c) or Where(cond, c, scores), with c a
// scalar so negative (-inf, or the most negative float as GPT-2 exports it) that scores + c is
// c: the same as adding the mask Where(cond, 0, c) (or Where(cond, c, 0)), which with cond a
// constant is computed once, here.
struct WhereMask {
  ValueId cond = no_value;
  bool scores_if_true = false;
  float c = 0;
};
std::optional<WhereMask> where_mask(const Model& model, const Node& where, ValueId scores) {
  if (!is_op(where, "Where", 3) || !model.is_constant(where.inputs[0])) return std::nullopt;
  const bool if_true = where.inputs[1] == scores && where.inputs[2] != scores;
  const bool if_false = where.inputs[2] == scores && where.inputs[1] != scores;
  if (!if_true && !if_false) return std::nullopt;
  const std::optional<double> c = f32_scalar(model, where.inputs[if_true ? 2 : 1]);
  const ValueInfo& cond = model.value(where.inputs[0]);
  if (!c || *c > -1e30 || cond.type != ElementType::boolean ||
      cond.shape.rank() > model.value(scores).shape.rank() ||
      model.value(where.outputs[0]).shape != model.value(scores).shape)
    return std::nullopt;
  return WhereMask{where.inputs[0], if_true, static_cast<float>(*c)};
}

ValueId add_mask_constant(Model& model, const WhereMask& where, const std::string& name) {
  const Tensor cond = model.constants().at(where.cond).contiguous();
  Tensor mask(ElementType::f32, cond.shape());
  const auto* keep = cond.data<bool>();
  float* out = mask.data<float>();
  for (int64_t i = 0; i < cond.size(); ++i)
    out[i] = keep[i] == where.scores_if_true ? 0.0f : where.c;
  return model.add_constant(unique_value_name(model, name), mask);
}

}  // namespace

size_t fuse_attention(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    const int qk_index = static_cast<int>(i);
    if (rewrite.removed(qk_index) || !plain_matmul(rewrite.node(qk_index))) continue;
    const Node& qk = rewrite.node(qk_index);
    const ValueInfo scores = model.value(qk.outputs[0]);  // a copy: add_constant grows the values
    if (scores.type != ElementType::f32 || scores.shape.rank() < 2) continue;
    // Short rows of scores (Swin's 7x7 windows: 49 keys) stay in cache unfused too, where one
    // batched product beats a small sgemm per head (measured 0.96x fused): fuse from 96 keys,
    // or when the key count is known only at run time.
    const int64_t keys = scores.shape[scores.shape.rank() - 1];
    if (keys >= 0 && keys < min_fused_keys) continue;
    if (model.value(qk.inputs[0]).shape.rank() < 2 || model.value(qk.inputs[1]).shape.rank() < 2)
      continue;
    // [Add(mask)] -> Softmax -> MatMul(., V).
    std::vector<int> absorbed;
    ValueId mask = no_value;
    std::optional<WhereMask> where_masked;
    int reader = rewrite.sole_reader(qk.outputs[0]);
    if (reader < 0) continue;
    if (is_op(rewrite.node(reader), "Add", 2)) {
      const Node& add = rewrite.node(reader);
      mask = other_input(add, qk.outputs[0]);
      if (mask == no_value || model.value(mask).type != ElementType::f32 ||
          model.value(mask).shape.rank() > scores.shape.rank() ||
          model.value(add.outputs[0]).shape != scores.shape)
        continue;
      absorbed.push_back(reader);
      reader = rewrite.sole_reader(add.outputs[0]);
      if (reader < 0) continue;
    } else if (auto where = where_mask(model, rewrite.node(reader), qk.outputs[0])) {
      where_masked = where;
      absorbed.push_back(reader);
      reader = rewrite.sole_reader(rewrite.node(reader).outputs[0]);
      if (reader < 0) continue;
    }
    if (!last_axis_softmax(model, rewrite.node(reader))) continue;
    const int softmax_index = reader;
    const int pv_index = rewrite.sole_reader(rewrite.node(softmax_index).outputs[0]);
    if (pv_index < 0 || !plain_matmul(rewrite.node(pv_index)) ||
        fused::has_scale(rewrite.node(pv_index)))
      continue;
    const Node& pv = rewrite.node(pv_index);
    if (pv.inputs[0] != rewrite.node(softmax_index).outputs[0] || pv.inputs[1] == pv.inputs[0] ||
        model.value(pv.inputs[1]).shape.rank() < 2)
      continue;

    if (where_masked)
      mask = add_mask_constant(model, *where_masked, rewrite.node(absorbed.back()).name + "/mask");
    Node fused{
        pv.name, attention::op_type, {qk.inputs[0], qk.inputs[1], pv.inputs[1]}, pv.outputs, {}};
    if (mask != no_value) fused.inputs.push_back(mask);
    // A scalar factor on Q or Kt alone joins the scale (torch's MultiheadAttention divides q,
    // Whisper multiplies q and k by hd^-0.25, each after splitting the heads), and the
    // Transpose before it can then be absorbed too.
    double scale = fused::scale(qk);
    int consumer_of[3] = {qk_index, qk_index, pv_index};
    std::vector<int> scalings;
    for (size_t o = 0; o < 2; ++o) {
      const int s = rewrite.producer(fused.inputs[o]);
      if (s < 0 || rewrite.sole_reader(fused.inputs[o]) != qk_index) continue;
      const Node& op = rewrite.node(s);
      const bool is_mul = is_op(op, "Mul", 2), is_div = is_op(op, "Div", 2);
      if (!is_mul && !is_div) continue;
      std::optional<double> c;
      ValueId x = no_value;
      for (size_t i = 0; i < 2 && !c; ++i) {
        if (is_div && i == 0) continue;  // only X / c: c / X is no scale
        c = f32_scalar(model, op.inputs[i]);
        x = op.inputs[1 - i];
      }
      if (!c || !std::isfinite(*c) || *c == 0.0 || model.is_constant(x) ||
          model.value(x).type != ElementType::f32 ||
          model.value(x).shape != model.value(op.outputs[0]).shape)
        continue;
      scale = is_mul ? scale * *c : scale / *c;
      fused.inputs[o] = x;
      consumer_of[o] = s;
      scalings.push_back(s);
    }
    fused.attributes.set("scale", scale);
    // Absorb the Transposes feeding Q, Kt and V alone, where the operand keeps its rows
    // contiguous.
    std::vector<int> transposes;
    for (size_t o = 0; o < 3; ++o) {
      const int t = rewrite.producer(fused.inputs[o]);
      if (t < 0 || !is_op(rewrite.node(t), "Transpose", 1) ||
          rewrite.sole_reader(fused.inputs[o]) != consumer_of[o])
        continue;
      // Q and Kt being one value read twice: sole_reader already refused it.
      const std::optional<std::vector<int64_t>> perm = permutation(model, rewrite.node(t));
      if (!perm || perm->size() < 2) continue;
      const auto last = static_cast<int64_t>(perm->size() - 1);
      // Kt only with its rows contiguous too: read by columns ('T'), sgemm repacked it for
      // every block of rows, slower than the Transpose's one copy (Whisper's 1500-key
      // attention: 93 against 83 ms + 1.4 ms of Transposes).
      const bool contiguous = perm->back() == last;
      if (!contiguous) continue;
      fused.inputs[o] = rewrite.node(t).inputs[0];
      fused.attributes.set(attention::perm_attributes[o], *perm);
      transposes.push_back(t);
    }
    // And the Transpose that alone reads the result (merging the heads back), where Y's rows
    // stay contiguous.
    const int y_transpose = rewrite.sole_reader(pv.outputs[0]);
    if (y_transpose >= 0 && is_op(rewrite.node(y_transpose), "Transpose", 1)) {
      const std::optional<std::vector<int64_t>> perm =
          permutation(model, rewrite.node(y_transpose));
      if (perm && perm->size() >= 2 && perm->back() == static_cast<int64_t>(perm->size()) - 1) {
        fused.outputs = rewrite.node(y_transpose).outputs;
        fused.attributes.set(attention::perm_attributes[3], *perm);
      }
    }
    std::vector<int> all = transposes;
    all.insert(all.end(), scalings.begin(), scalings.end());
    all.push_back(qk_index);
    all.insert(all.end(), absorbed.begin(), absorbed.end());
    all.push_back(softmax_index);
    all.push_back(pv_index);
    if (fused.attributes.has(attention::perm_attributes[3])) all.push_back(y_transpose);
    rewrite.replace(pv_index, std::move(fused), all);
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
