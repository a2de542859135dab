// Replaces the decomposed layer normalization that exporters write before opset 17,
//   mean = ReduceMean(x, axes)            d = x - mean
//   var  = ReduceMean(Pow(d, 2), axes)    (or d * d)
//   y    = d / Sqrt(var + epsilon)        [* gamma]  [+ beta]
// over trailing axes, by one LayerNormalization node (axis = the first normalized axis). The node
// takes the name and output value of the last node of the pattern. Without the Mul, gamma is a
// constant of ones; gamma and beta are stored with exactly the normalized shape.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"

namespace troupe::transformations {

namespace {

// The normalized trailing axes of a ReduceMean keeping its dims, as the first of them; nullopt
// when the node reduces other axes, drops them, or reads its axes from a non-constant.
std::optional<int64_t> first_trailing_axis(const Model& model, const Node& node, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  const std::optional<std::vector<int64_t>> axes = kept_dims_mean_axes(model, node, r);
  if (!axes) return std::nullopt;
  const int64_t first = r - static_cast<int64_t>(axes->size());
  for (size_t i = 0; i < axes->size(); ++i)
    if ((*axes)[i] != first + static_cast<int64_t>(i)) return std::nullopt;
  return first;
}

// `t` with exactly the shape `dims` when it broadcasts to it without repeating values along an
// axis (leading 1s aside), or when it holds one value (repeated); else nullopt.
std::optional<Tensor> as_normalized(const Tensor& t, const std::vector<int64_t>& dims) {
  Tensor out(ElementType::f32, Shape(dims));
  const Tensor dense = t.contiguous();
  if (t.size() == 1) {
    std::fill(out.data<float>(), out.data<float>() + out.size(), dense.data<float>()[0]);
    return out;
  }
  std::vector<int64_t> own = t.shape().dims();
  while (own.size() > dims.size() && own.front() == 1) own.erase(own.begin());
  if (own.size() > dims.size()) return std::nullopt;
  own.insert(own.begin(), dims.size() - own.size(), 1);
  if (own != dims) return std::nullopt;
  std::copy(dense.data<float>(), dense.data<float>() + dense.size(), out.data<float>());
  return out;
}

// The constant holding `t`: `original` when it already has t's shape, else a new one.
ValueId constant_for(Model& model, ValueId original, const Tensor& t, const std::string& name) {
  if (model.constants().at(original).shape() == t.shape()) return original;
  return model.add_constant(unique_value_name(model, name), t);
}

}  // namespace

size_t fuse_layer_norm(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  const std::vector<std::vector<int>> reader_lists = readers(model);
  for (size_t s = 0; s < rewrite.nodes().size(); ++s) {
    const int sub_index = static_cast<int>(s);
    const Node& sub = rewrite.node(sub_index);
    if (rewrite.removed(sub_index) || !is_op(sub, "Sub", 2)) continue;
    const ValueId x = sub.inputs[0];
    const ValueInfo x_info = model.value(x);  // a copy: add_constant grows the values
    // Leading dimensions may be dynamic (a batch or sequence chosen per request); the
    // normalized ones must be known (checked below).
    if (x_info.type != ElementType::f32 || x_info.shape.rank() == 0) continue;
    const size_t rank = x_info.shape.rank();

    // mean = ReduceMean(x), read by the Sub only.
    const int mean_index = rewrite.producer(sub.inputs[1]);
    if (mean_index < 0 || rewrite.sole_reader(sub.inputs[1]) != sub_index) continue;
    const Node& mean = rewrite.node(mean_index);
    const std::optional<int64_t> axis = first_trailing_axis(model, mean, rank);
    if (!axis || mean.inputs[0] != x) continue;
    bool normalized_known = true;
    for (size_t d = static_cast<size_t>(*axis); d < rank; ++d)
      normalized_known = normalized_known && x_info.shape[d] != Shape::dynamic;
    if (!normalized_known) continue;

    // d is read by the square and the division only.
    const ValueId d = sub.outputs[0];
    if (is_model_output(model, d)) continue;
    const std::vector<int>& d_readers = reader_lists[static_cast<size_t>(d)];
    if (d_readers.size() != 2) continue;
    int square_index = -1;
    int div_index = -1;
    for (int r : d_readers) {
      const Node& n = rewrite.node(r);
      if (is_op(n, "Pow", 2) && n.inputs[0] == d && is_f32_scalar(model, n.inputs[1], 2.0))
        square_index = r;
      else if (is_op(n, "Mul", 2) && n.inputs[0] == d && n.inputs[1] == d)
        square_index = r;
      else if (is_op(n, "Div", 2) && n.inputs[0] == d)
        div_index = r;
    }
    if (square_index < 0 || div_index < 0 || rewrite.removed(square_index) ||
        rewrite.removed(div_index))
      continue;

    // var = ReduceMean(d^2) over the same axes; Sqrt(var + epsilon) is the divisor.
    const int var_index = rewrite.sole_reader(rewrite.node(square_index).outputs[0]);
    if (var_index < 0) continue;
    const Node& var = rewrite.node(var_index);
    if (first_trailing_axis(model, var, rank) != axis ||
        var.inputs[0] != rewrite.node(square_index).outputs[0])
      continue;
    const int eps_index = rewrite.sole_reader(var.outputs[0]);
    if (eps_index < 0 || !is_op(rewrite.node(eps_index), "Add", 2)) continue;
    const std::optional<double> epsilon =
        f32_scalar(model, other_input(rewrite.node(eps_index), var.outputs[0]));
    if (!epsilon || *epsilon < 0) continue;
    const int sqrt_index = rewrite.sole_reader(rewrite.node(eps_index).outputs[0]);
    if (sqrt_index < 0 || !is_op(rewrite.node(sqrt_index), "Sqrt", 1)) continue;
    const Node& div = rewrite.node(div_index);
    if (div.inputs[1] != rewrite.node(sqrt_index).outputs[0] ||
        rewrite.sole_reader(rewrite.node(sqrt_index).outputs[0]) != div_index)
      continue;

    std::vector<int> absorbed{mean_index, sub_index,  square_index, var_index,
                              eps_index,  sqrt_index, div_index};
    const std::vector<int64_t> normalized(x_info.shape.dims().begin() + *axis,
                                          x_info.shape.dims().end());
    int last = div_index;
    ValueId result = div.outputs[0];

    // Optional affine part: * gamma, then + beta, both constants over the normalized axes.
    std::optional<Tensor> gamma;
    std::optional<Tensor> beta;
    ValueId gamma_id = no_value;
    ValueId beta_id = no_value;
    const int mul_index = rewrite.sole_reader(result);
    if (mul_index >= 0 && is_op(rewrite.node(mul_index), "Mul", 2)) {
      gamma_id = other_input(rewrite.node(mul_index), result);
      const Tensor* g = f32_constant(model, gamma_id);
      if (g && model.value(rewrite.node(mul_index).outputs[0]).shape == x_info.shape)
        gamma = as_normalized(*g, normalized);
      if (gamma) {
        absorbed.push_back(mul_index);
        last = mul_index;
        result = rewrite.node(mul_index).outputs[0];
        const int add_index = rewrite.sole_reader(result);
        if (add_index >= 0 && is_op(rewrite.node(add_index), "Add", 2)) {
          beta_id = other_input(rewrite.node(add_index), result);
          const Tensor* b = f32_constant(model, beta_id);
          if (b && model.value(rewrite.node(add_index).outputs[0]).shape == x_info.shape)
            beta = as_normalized(*b, normalized);
          if (beta) {
            absorbed.push_back(add_index);
            last = add_index;
            result = rewrite.node(add_index).outputs[0];
          }
        }
      }
    }
    if (model.value(result).shape != x_info.shape) continue;

    const std::string name = rewrite.node(last).name;
    std::vector<ValueId> inputs{x};
    if (gamma) {
      inputs.push_back(constant_for(model, gamma_id, *gamma, name + "/scale"));
    } else {
      Tensor ones(ElementType::f32, Shape(normalized));
      std::fill(ones.data<float>(), ones.data<float>() + ones.size(), 1.f);
      inputs.push_back(model.add_constant(unique_value_name(model, name + "/scale"), ones));
    }
    if (beta) inputs.push_back(constant_for(model, beta_id, *beta, name + "/bias"));
    Attributes attributes;
    attributes.set("axis", *axis);
    attributes.set("epsilon", *epsilon);
    Node layer_norm{name, "LayerNormalization", std::move(inputs), {result}, attributes};
    rewrite.replace(last, std::move(layer_norm), absorbed);
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
