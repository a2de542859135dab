// Fuses MatMul followed by the Add of a constant bias along the last axis (how exporters write a
// Linear layer on a batch of rows: MatMul(X, W) + b) into the MatMul, whose fast kernel adds the
// bias while the result is still in registers. The MatMul keeps its name and takes over the Add's
// output value.
#include <string>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/ops/fused_post_ops.hpp"

namespace troupe::transformations {

namespace {

// The bias as a 1-D [n] tensor when `c` (the Add's constant operand) only varies along the last
// axis of the product [.., n]: shape [n], [1, .., 1, n], a scalar or [1, .., 1] (broadcast to n).
// `out_rank` is the product's rank; a longer c would change the Add's output shape.
std::optional<Tensor> bias_vector(const Tensor& c, size_t out_rank, int64_t n) {
  const Shape& shape = c.shape();
  if (shape.rank() > out_rank) return std::nullopt;
  for (size_t i = 0; i + 1 < shape.rank(); ++i)
    if (shape[i] != 1) return std::nullopt;
  const int64_t last = shape.rank() == 0 ? 1 : shape[shape.rank() - 1];
  if (last != n && last != 1) return std::nullopt;
  const Tensor dense = c.contiguous();
  Tensor bias(ElementType::f32, Shape{n});
  for (int64_t j = 0; j < n; ++j) bias.data<float>()[j] = dense.data<float>()[last == 1 ? 0 : j];
  return bias;
}

}  // namespace

size_t fuse_matmul_bias(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    Node& mm = rewrite.nodes()[i];
    if (rewrite.removed(static_cast<int>(i)) || !is_op(mm, "MatMul", 2) || fused::is_fused(mm))
      continue;
    const ValueInfo y = model.value(mm.outputs[0]);  // a copy: add_constant grows the values
    // A 1-D B drops the product's last axis; the bias would run along another one. Leading
    // dimensions may be dynamic (a batch chosen per request): the bias runs along the last.
    if (y.type != ElementType::f32 || y.shape.rank() == 0 ||
        y.shape[y.shape.rank() - 1] == Shape::dynamic || model.value(mm.inputs[1]).shape.rank() < 2)
      continue;
    const int add_index = rewrite.sole_reader(mm.outputs[0]);
    if (add_index < 0) continue;
    const Node& add = rewrite.node(add_index);
    if (!is_op(add, "Add", 2)) continue;
    const ValueId c = other_input(add, mm.outputs[0]);
    const Tensor* c_data = f32_constant(model, c);
    if (!c_data || model.value(add.outputs[0]).shape != y.shape) continue;
    const int64_t n = y.shape[y.shape.rank() - 1];
    const std::optional<Tensor> bias = bias_vector(*c_data, y.shape.rank(), n);
    if (!bias) continue;

    const ValueId bias_id =
        c_data->shape() == Shape{n}
            ? c
            : model.add_constant(unique_value_name(model, mm.name + "/bias"), *bias);
    mm.inputs.push_back(bias_id);
    mm.attributes.set("fused_bias", int64_t{1});
    mm.outputs = add.outputs;
    rewrite.absorb(mm.name, {add_index});
    rewrite.update_producer(static_cast<int>(i));
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
