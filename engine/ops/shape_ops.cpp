// Schemas of the ops that move or reinterpret data without arithmetic: Reshape, Flatten,
// Transpose, Concat, Identity, Squeeze, Unsqueeze, Expand, Tile, Shape, ConstantOfShape, Range,
// Gather, GatherElements, GatherND, Slice, ScatterND, ScatterElements (and the deprecated Scatter),
// Split, Dropout, Pad, Size, Trilu, OneHot, EyeLike, ReverseSequence, DepthToSpace and
// SpaceToDepth.

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"

namespace troupe {

using infer::TypeClass;

namespace {

std::string ints_to_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// A 1-D integer input holding a list (a shape, axes, pads, ...): its values when constant.
std::optional<std::vector<int64_t>> list_input(const ShapeInferContext& ctx, size_t i,
                                               const std::string& what) {
  infer::require_type(ctx, i, TypeClass::index);
  if (ctx.shape(i).rank() > 1)
    ctx.fail(what + " (" + infer::input_label(ctx, i) + ") must be 1-D, got shape " +
             ctx.shape(i).to_string());
  return infer::constant_ints(ctx, i, what);
}

// The length of a 1-D list input when its shape is static, -1 otherwise.
int64_t list_length(const ShapeInferContext& ctx, size_t i) {
  const Shape& s = ctx.shape(i);
  if (s.rank() == 0) return 1;
  return s[0];
}

std::string entries_to_string(const PartialInts& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? "," : "") + (v[i] ? std::to_string(*v[i]) : std::string("?"));
  return s + "]";
}

// A 1-D integer list input that sizes the output (a target shape, repeats) as far as shape
// inference knows it: a constant's entries, the entries it could follow of a list computed from
// shapes, and std::nullopt for the rest. Refused when not even its length is known.
PartialInts list_entries(const ShapeInferContext& ctx, size_t i, const std::string& what) {
  list_input(ctx, i, what);  // type and rank checks
  if (auto known = infer::partial_ints(ctx, i, what)) return *known;
  const int64_t n = list_length(ctx, i);
  if (n == Shape::dynamic)
    infer::unsupported(ctx, what + " (" + infer::input_label(ctx, i) +
                                ") is computed at run time and its length is unknown");
  return PartialInts(static_cast<size_t>(n));
}

// Output dimensions given by a list of sizes: an unknown entry is a dynamic dimension; a negative
// one is an error.
std::vector<int64_t> size_entries(const ShapeInferContext& ctx, const PartialInts& entries,
                                  const std::string& what) {
  std::vector<int64_t> dims;
  for (const auto& d : entries) {
    if (d && *d < 0)
      ctx.fail(what + " " + entries_to_string(entries) + " has negative entry " +
               std::to_string(*d));
    dims.push_back(d ? *d : Shape::dynamic);
  }
  return dims;
}

std::vector<ValueInfo> same_as_input(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  return {infer::value_info(ctx.type(0), ctx.shape(0))};
}

// a * b of a shape's dimensions; a target shape from a file can overflow int64 (a fuzzed ONNX
// Reshape did), which fails the node naming `shape` instead of wrapping.
int64_t checked_product(const ShapeInferContext& ctx, int64_t a, int64_t b,
                        const std::string& shape) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product))
    ctx.fail("shape " + shape + " has more elements than int64 can count");
  return product;
}

std::vector<ValueInfo> infer_reshape(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  // Entries computed at run time that shape inference cannot follow stay dynamic; the stream
  // learns them when it specializes the graph for a request's shapes.
  if (ctx.shape(1).rank() != 1)
    ctx.fail("the target shape must be 1-D, got shape " + ctx.shape(1).to_string());
  const PartialInts target = list_entries(ctx, 1, "the target shape");
  const Shape& in = ctx.shape(0);
  const bool allow_zero = ctx.node.attributes.get_int_or("allowzero", 0) != 0;
  const bool all_known =
      std::all_of(target.begin(), target.end(), [](const auto& v) { return v.has_value(); });

  std::vector<int64_t> out(target.size(), Shape::dynamic);
  std::optional<size_t> inferred;
  bool has_zero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    if (!target[i]) continue;  // known at run time only
    const int64_t v = *target[i];
    if (v == -1) {
      if (inferred) ctx.fail("target shape " + entries_to_string(target) + " has more than one -1");
      inferred = i;
    } else if (v == 0 && !allow_zero) {
      if (i >= in.rank())
        ctx.fail("target shape " + entries_to_string(target) + " has 0 at position " +
                 std::to_string(i) + ", which copies input dimension " + std::to_string(i) +
                 ", but the input " + in.to_string() + " has rank " + std::to_string(in.rank()));
      out[i] = in[i];
    } else if (v < 0) {
      ctx.fail("target shape " + entries_to_string(target) + " has invalid entry " +
               std::to_string(v));
    } else {
      has_zero = has_zero || v == 0;
      out[i] = v;
    }
  }
  if (inferred && has_zero)
    ctx.fail("target shape " + entries_to_string(target) +
             " has both -1 and 0 with allowzero=1; the -1 cannot be inferred");

  if (inferred && all_known) {
    // The -1 takes what is left: the input dimensions not copied by a 0 entry, divided by the
    // explicit target dimensions (the copied ones cancel, even when dynamic).
    auto copied = [&](size_t i) { return !allow_zero && i < target.size() && *target[i] == 0; };
    int64_t in_rest = 1;
    bool rest_known = true;
    for (size_t i = 0; i < in.rank(); ++i) {
      if (copied(i)) continue;
      if (in[i] == Shape::dynamic)
        rest_known = false;
      else
        in_rest = checked_product(ctx, in_rest, in[i], in.to_string());
    }
    int64_t out_rest = 1;
    for (size_t i = 0; i < target.size(); ++i)
      if (i != *inferred && !copied(i))
        out_rest = checked_product(ctx, out_rest, *target[i], entries_to_string(target));
    if (rest_known) {
      if (out_rest == 0 || in_rest % out_rest != 0)
        ctx.fail("cannot reshape " + in.to_string() + " to " + entries_to_string(target) +
                 ": the remaining " + std::to_string(in_rest) +
                 " elements do not divide evenly by " + std::to_string(out_rest));
      out[*inferred] = in_rest / out_rest;
    }
  } else if (!inferred && all_known && in.is_static()) {
    int64_t out_count = 1;
    for (int64_t d : out) out_count = checked_product(ctx, out_count, d, Shape(out).to_string());
    if (out_count != in.element_count())
      ctx.fail("cannot reshape " + in.to_string() + " (" + std::to_string(in.element_count()) +
               " elements) to " + Shape(out).to_string() + " (" + std::to_string(out_count) +
               " elements)");
  }
  return {infer::value_info(ctx.type(0), Shape(std::move(out)))};
}

std::vector<ValueInfo> infer_flatten(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  const Shape& in = ctx.shape(0);
  const auto rank = static_cast<int64_t>(in.rank());
  int64_t axis = ctx.node.attributes.get_int_or("axis", 1);
  if (axis < -rank || axis > rank)
    ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank) +
             " (valid: " + std::to_string(-rank) + " to " + std::to_string(rank) + ")");
  if (axis < 0) axis += rank;
  int64_t outer = 1;
  int64_t inner = 1;
  for (int64_t i = 0; i < rank; ++i) {
    if (i < axis)
      outer = infer::mul_dims(outer, in[i]);
    else
      inner = infer::mul_dims(inner, in[i]);
  }
  return {infer::value_info(ctx.type(0), Shape{outer, inner})};
}

std::vector<ValueInfo> infer_transpose(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  const Shape& in = ctx.shape(0);
  std::vector<int64_t> perm;
  if (ctx.node.attributes.has("perm")) {
    perm = ctx.node.attributes.get_ints("perm");
  } else {
    for (size_t i = in.rank(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  if (perm.size() != in.rank())
    ctx.fail("perm " + ints_to_string(perm) + " has " + std::to_string(perm.size()) +
             " entries but the input " + in.to_string() + " has rank " + std::to_string(in.rank()));
  std::vector<bool> used(in.rank(), false);
  std::vector<int64_t> out(in.rank());
  for (size_t i = 0; i < perm.size(); ++i) {
    const int64_t p = perm[i];
    if (p < 0 || p >= static_cast<int64_t>(in.rank()) || used[static_cast<size_t>(p)])
      ctx.fail("perm " + ints_to_string(perm) + " is not a permutation of 0.." +
               std::to_string(static_cast<int64_t>(in.rank()) - 1));
    used[static_cast<size_t>(p)] = true;
    out[i] = in[static_cast<size_t>(p)];
  }
  return {infer::value_info(ctx.type(0), Shape(std::move(out)))};
}

std::vector<ValueInfo> infer_concat(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  if (!ctx.node.attributes.has("axis")) ctx.fail("missing required attribute 'axis'");
  const Shape& first = ctx.shape(0);
  if (first.rank() == 0) ctx.fail("cannot concatenate scalars (input 0 has rank 0)");
  const size_t axis = infer::normalize_axis(ctx, ctx.node.attributes.get_int("axis"), first.rank());
  std::vector<int64_t> out = first.dims();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    infer::require_same_type(ctx, 0, i);
    const Shape& s = ctx.shape(i);
    if (s.rank() != first.rank())
      ctx.fail(infer::input_label(ctx, i) + " has shape " + s.to_string() +
               " whose rank differs from input 0 " + first.to_string());
    for (size_t d = 0; d < s.rank(); ++d) {
      if (d == axis) {
        out[d] = infer::add_dims(out[d], s[d]);
      } else if (out[d] == Shape::dynamic) {
        out[d] = s[d];
      } else if (s[d] != Shape::dynamic && s[d] != out[d]) {
        ctx.fail(infer::input_label(ctx, i) + " has shape " + s.to_string() +
                 " which differs from input 0 " + first.to_string() + " in dimension " +
                 std::to_string(d) + " (concatenating along axis " + std::to_string(axis) + ")");
      }
    }
  }
  return {infer::value_info(ctx.type(0), Shape(std::move(out)))};
}

// Axes of Squeeze/Unsqueeze: the second input (opset 13) or the attribute (earlier opsets).
// std::nullopt when given as an input that is not a constant.
std::optional<std::vector<int64_t>> axes_of(const ShapeInferContext& ctx, bool* given) {
  if (ctx.has_input(1)) {
    *given = true;
    return list_input(ctx, 1, "the axes");
  }
  *given = ctx.node.attributes.has("axes");
  return ctx.node.attributes.get_ints_or("axes", {});
}

std::vector<ValueInfo> infer_squeeze(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  const Shape& in = ctx.shape(0);
  bool given = false;
  const auto axes = axes_of(ctx, &given);
  if (!axes) {
    const int64_t n = list_length(ctx, 1);
    if (n == Shape::dynamic || n > static_cast<int64_t>(in.rank()))
      ctx.fail("the axes input is not a constant and its length is unknown");
    return {
        infer::value_info(ctx.type(0), infer::dynamic_shape(in.rank() - static_cast<size_t>(n)))};
  }
  std::vector<int64_t> out;
  if (!given) {
    // Without axes every dimension of size 1 goes; a dynamic dimension is assumed not to be 1.
    for (int64_t d : in)
      if (d != 1) out.push_back(d);
  } else {
    const std::vector<size_t> drop = infer::normalize_axes(ctx, *axes, in.rank());
    for (size_t d = 0; d < in.rank(); ++d) {
      if (std::find(drop.begin(), drop.end(), d) == drop.end()) {
        out.push_back(in[d]);
      } else if (in[d] != 1 && in[d] != Shape::dynamic) {
        ctx.fail("cannot squeeze axis " + std::to_string(d) + " of shape " + in.to_string() +
                 ": its size is " + std::to_string(in[d]) + ", not 1");
      }
    }
  }
  return {infer::value_info(ctx.type(0), Shape(std::move(out)))};
}

std::vector<ValueInfo> infer_unsqueeze(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  const Shape& in = ctx.shape(0);
  bool given = false;
  const auto axes = axes_of(ctx, &given);
  if (!axes) {
    const int64_t n = list_length(ctx, 1);
    if (n == Shape::dynamic) ctx.fail("the axes input is not a constant and its length is unknown");
    return {
        infer::value_info(ctx.type(0), infer::dynamic_shape(in.rank() + static_cast<size_t>(n)))};
  }
  if (!given) ctx.fail("missing axes (input 1, or attribute 'axes' before opset 13)");
  const size_t rank = in.rank() + axes->size();
  const std::vector<size_t> insert = infer::normalize_axes(ctx, *axes, rank);
  std::vector<int64_t> out;
  size_t next_in = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (std::find(insert.begin(), insert.end(), d) != insert.end())
      out.push_back(1);
    else
      out.push_back(in[next_in++]);
  }
  return {infer::value_info(ctx.type(0), Shape(std::move(out)))};
}

std::vector<ValueInfo> infer_expand(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  // An entry known only at run time broadcasts as a dynamic dimension: an input dimension larger
  // than 1 survives it.
  const Shape target(size_entries(ctx, list_entries(ctx, 1, "the target shape"), "target shape"));
  return {infer::value_info(ctx.type(0), broadcast_shapes(ctx.shape(0), target, ctx))};
}

std::vector<ValueInfo> infer_tile(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  const Shape& in = ctx.shape(0);
  const std::vector<int64_t> repeats =
      size_entries(ctx, list_entries(ctx, 1, "the repeats"), "repeats");
  if (repeats.size() != in.rank())
    ctx.fail("repeats " + ints_to_string(repeats) + " has " + std::to_string(repeats.size()) +
             " entries but the input " + in.to_string() + " has rank " + std::to_string(in.rank()));
  std::vector<int64_t> out(in.rank());
  for (size_t i = 0; i < in.rank(); ++i) out[i] = infer::mul_dims(in[i], repeats[i]);
  return {infer::value_info(ctx.type(0), Shape(std::move(out)))};
}

std::vector<ValueInfo> infer_shape(const ShapeInferContext& ctx) {
  const auto rank = static_cast<int64_t>(ctx.shape(0).rank());
  int64_t start = ctx.node.attributes.get_int_or("start", 0);
  int64_t end = ctx.node.attributes.get_int_or("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  return {infer::value_info(ElementType::i64, Shape{std::max<int64_t>(end - start, 0)})};
}

std::vector<ValueInfo> infer_constant_of_shape(const ShapeInferContext& ctx) {
  ElementType type = ElementType::f32;
  if (ctx.node.attributes.has("value")) {
    const Tensor& value = ctx.node.attributes.get_tensor("value");
    if (value.size() != 1)
      ctx.fail("attribute 'value' must hold exactly one element, got shape " +
               value.shape().to_string());
    type = value.element_type();
  }
  return {infer::value_info(type,
                            Shape(size_entries(ctx, list_entries(ctx, 0, "the shape"), "shape")))};
}

std::vector<ValueInfo> infer_range(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::numeric);
  for (size_t i = 0; i < 3; ++i) {
    infer::require_same_type(ctx, 0, i);
    const Shape& s = ctx.shape(i);
    if (s.is_static() && s.element_count() != 1)
      ctx.fail(infer::input_label(ctx, i) + " must be a scalar, got shape " + s.to_string());
  }
  const Tensor* start = ctx.constant(0);
  const Tensor* limit = ctx.constant(1);
  const Tensor* delta = ctx.constant(2);
  if (start == nullptr || limit == nullptr || delta == nullptr)
    return {infer::value_info(ctx.type(0), Shape{Shape::dynamic})};
  const double d = delta->value_at(0);
  if (d == 0) ctx.fail("delta must not be 0");
  const double count = std::ceil((limit->value_at(0) - start->value_at(0)) / d);
  return {infer::value_info(ctx.type(0), Shape{std::max<int64_t>(static_cast<int64_t>(count), 0)})};
}

std::vector<ValueInfo> infer_gather(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  infer::require_type(ctx, 1, TypeClass::index);
  const Shape& data = ctx.shape(0);
  if (data.rank() == 0) ctx.fail("data must have rank >= 1, got a scalar");
  const size_t axis =
      infer::normalize_axis(ctx, ctx.node.attributes.get_int_or("axis", 0), data.rank());
  std::vector<int64_t> out(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(axis));
  for (int64_t d : ctx.shape(1)) out.push_back(d);
  for (size_t d = axis + 1; d < data.rank(); ++d) out.push_back(data[d]);
  return {infer::value_info(ctx.type(0), Shape(std::move(out)))};
}

// Number of elements a slice start:end:step selects from a dimension of size `dim`.
int64_t slice_length(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    return end > start ? (end - start + step - 1) / step : 0;
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  return start > end ? (start - end - step - 1) / -step : 0;
}

std::vector<ValueInfo> infer_slice(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  const Shape& in = ctx.shape(0);
  const auto& attrs = ctx.node.attributes;
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (ctx.num_inputs() == 1) {
    // Opset < 10: starts/ends/axes are attributes.
    if (!attrs.has("starts") || !attrs.has("ends"))
      ctx.fail("missing starts/ends (inputs 1 and 2, or attributes before opset 10)");
    starts = attrs.get_ints("starts");
    ends = attrs.get_ints("ends");
    if (attrs.has("axes")) axes = attrs.get_ints("axes");
  } else {
    if (ctx.num_inputs() < 3) ctx.fail("expects inputs data, starts and ends");
    starts = list_input(ctx, 1, "starts");
    ends = list_input(ctx, 2, "ends");
    if (ctx.has_input(3)) {
      axes = list_input(ctx, 3, "axes");
      if (!axes) return {infer::value_info(ctx.type(0), infer::dynamic_shape(in.rank()))};
    }
    if (ctx.has_input(4)) {
      steps = list_input(ctx, 4, "steps");
      if (!steps) return {infer::value_info(ctx.type(0), infer::dynamic_shape(in.rank()))};
    }
  }
  if (!starts || !ends) return {infer::value_info(ctx.type(0), infer::dynamic_shape(in.rank()))};
  if (starts->size() != ends->size())
    ctx.fail("starts " + ints_to_string(*starts) + " and ends " + ints_to_string(*ends) +
             " differ in length");
  if (!axes) {
    axes.emplace();
    for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i));
  }
  if (!steps) steps = std::vector<int64_t>(starts->size(), 1);
  if (axes->size() != starts->size() || steps->size() != starts->size())
    ctx.fail("starts, ends, axes and steps must have the same length");
  const std::vector<size_t> norm_axes = infer::normalize_axes(ctx, *axes, in.rank());

  std::vector<int64_t> out = in.dims();
  for (size_t i = 0; i < norm_axes.size(); ++i) {
    const size_t a = norm_axes[i];
    const int64_t step = (*steps)[i];
    if (step == 0) ctx.fail("steps must not contain 0");
    out[a] = in[a] == Shape::dynamic ? Shape::dynamic
                                     : slice_length(in[a], (*starts)[i], (*ends)[i], step);
  }
  return {infer::value_info(ctx.type(0), Shape(std::move(out)))};
}

std::vector<ValueInfo> infer_split(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  const Shape& in = ctx.shape(0);
  if (in.rank() == 0) ctx.fail("cannot split a scalar");
  const size_t axis =
      infer::normalize_axis(ctx, ctx.node.attributes.get_int_or("axis", 0), in.rank());
  const size_t n = ctx.node.outputs.size();
  const int64_t dim = in[axis];

  std::optional<std::vector<int64_t>> split;
  if (ctx.has_input(1)) {
    split = list_input(ctx, 1, "split");
    if (!split) {
      std::vector<ValueInfo> outs(n, infer::value_info(ctx.type(0), in));
      for (auto& o : outs) o.shape[axis] = Shape::dynamic;
      return outs;
    }
  } else if (ctx.node.attributes.has("split")) {
    split = ctx.node.attributes.get_ints("split");
  }

  std::vector<int64_t> sizes;
  if (split) {
    if (split->size() != n)
      ctx.fail("split " + ints_to_string(*split) + " has " + std::to_string(split->size()) +
               " entries but the node has " + std::to_string(n) + " outputs");
    int64_t total = 0;
    for (int64_t s : *split) {
      if (s < 0) ctx.fail("split " + ints_to_string(*split) + " has a negative entry");
      total += s;
    }
    if (dim != Shape::dynamic && total != dim)
      ctx.fail("split " + ints_to_string(*split) + " sums to " + std::to_string(total) +
               " but axis " + std::to_string(axis) + " of " + in.to_string() + " has size " +
               std::to_string(dim));
    sizes = *split;
  } else if (dim == Shape::dynamic) {
    sizes.assign(n, Shape::dynamic);
  } else {
    // Equal parts; with opset 18's num_outputs the last part may be smaller.
    const auto parts = static_cast<int64_t>(n);
    const int64_t chunk = (dim + parts - 1) / parts;
    const bool even = dim % parts == 0;
    if (!even && (!ctx.node.attributes.has("num_outputs") || chunk * (parts - 1) >= dim))
      ctx.fail("axis " + std::to_string(axis) + " of " + in.to_string() + " cannot be split into " +
               std::to_string(n) + " equal parts");
    for (int64_t i = 0; i < parts; ++i) sizes.push_back(std::min(chunk, dim - i * chunk));
  }
  std::vector<ValueInfo> outs;
  for (int64_t s : sizes) {
    Shape shape = in;
    shape[axis] = s;
    outs.push_back(infer::value_info(ctx.type(0), shape));
  }
  return outs;
}

std::vector<ValueInfo> infer_dropout(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  // Training with a ratio other than 0 drops random elements, which troupe does not do. A ratio
  // that is not a constant is checked by the kernel.
  const Tensor* training = ctx.constant(2);
  const Tensor* ratio = ctx.has_input(1) ? ctx.constant(1) : nullptr;
  const bool drops = !ctx.has_input(1) || (ratio != nullptr && ratio->value_at(0) != 0);
  if (training != nullptr && training->value_at(0) != 0 && drops)
    infer::unsupported(ctx, "training_mode=true is not supported (inference only)");
  std::vector<ValueInfo> outs{infer::value_info(ctx.type(0), ctx.shape(0))};
  if (ctx.node.outputs.size() > 1)
    outs.push_back(infer::value_info(ElementType::boolean, ctx.shape(0)));
  return outs;
}

std::vector<ValueInfo> infer_pad(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  const Shape& in = ctx.shape(0);
  const auto& attrs = ctx.node.attributes;
  const std::string mode = attrs.get_string_or("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    ctx.fail("unknown mode '" + mode + "' (expected constant, reflect, edge or wrap)");
  if (ctx.has_input(2)) {
    infer::require_same_type(ctx, 0, 2);
    const Shape& v = ctx.shape(2);
    if (v.is_static() && v.element_count() != 1)
      ctx.fail("constant_value must be a scalar, got shape " + v.to_string());
  }

  std::optional<std::vector<int64_t>> pads;
  if (ctx.has_input(1))
    pads = list_input(ctx, 1, "pads");
  else if (attrs.has("pads"))
    pads = attrs.get_ints("pads");  // opset < 11
  else
    ctx.fail("missing pads (input 1, or attribute 'pads' before opset 11)");

  std::vector<size_t> axes;
  if (ctx.has_input(3)) {
    const auto given = list_input(ctx, 3, "axes");
    if (!given) return {infer::value_info(ctx.type(0), infer::dynamic_shape(in.rank()))};
    axes = infer::normalize_axes(ctx, *given, in.rank());
  } else {
    for (size_t i = 0; i < in.rank(); ++i) axes.push_back(i);
  }
  if (!pads) {
    std::vector<int64_t> out = in.dims();
    for (size_t a : axes) out[a] = Shape::dynamic;
    return {infer::value_info(ctx.type(0), Shape(std::move(out)))};
  }
  if (pads->size() != 2 * axes.size())
    ctx.fail("pads " + ints_to_string(*pads) + " has " + std::to_string(pads->size()) +
             " entries, expected " + std::to_string(2 * axes.size()) +
             " (begin and end for each padded axis)");
  std::vector<int64_t> out = in.dims();
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = axes[i];
    if (in[a] == Shape::dynamic) continue;
    const int64_t begin = (*pads)[i];
    const int64_t end = (*pads)[i + axes.size()];
    out[a] = in[a] + begin + end;
    if (out[a] < 0)
      ctx.fail("pads " + ints_to_string(*pads) + " remove more than the " + std::to_string(in[a]) +
               " elements of axis " + std::to_string(a));
    if (mode != "constant" && in[a] == 0 && out[a] > 0)
      ctx.fail("mode '" + mode + "' cannot pad axis " + std::to_string(a) + ", which is empty");
    if (mode == "reflect" && in[a] == 1 && out[a] > 1)
      ctx.fail("mode 'reflect' cannot pad axis " + std::to_string(a) + ", which has size 1");
  }
  return {infer::value_info(ctx.type(0), Shape(std::move(out)))};
}

// DepthToSpace moves blocks of channels [N, C, H, W] -> [N, C / b², H * b, W * b] (mode DCR,
// the default, or CRD); SpaceToDepth is its inverse for DCR.
std::vector<ValueInfo> infer_depth_space(const ShapeInferContext& ctx, bool to_space) {
  infer::require_type(ctx, 0, TypeClass::any);
  const Shape& x = ctx.shape(0);
  if (x.rank() != 4) ctx.fail("input must have shape [N, C, H, W], got " + x.to_string());
  const auto& attrs = ctx.node.attributes;
  if (!attrs.has("blocksize")) ctx.fail("attribute blocksize is missing");
  const int64_t b = attrs.get_int("blocksize");
  if (b < 1) ctx.fail("attribute blocksize is " + std::to_string(b) + ", expected >= 1");
  if (to_space) {
    const std::string mode = attrs.get_string_or("mode", "DCR");
    if (mode != "DCR" && mode != "CRD")
      ctx.fail("attribute mode is '" + mode + "', expected DCR or CRD");
    if (x[1] >= 0 && x[1] % (b * b) != 0)
      ctx.fail("the channels (" + std::to_string(x[1]) + ") are not a multiple of blocksize² (" +
               std::to_string(b * b) + ")");
    auto div = [&](int64_t d) { return d < 0 ? d : d / (b * b); };
    return {infer::value_info(
        ctx.type(0), Shape{x[0], div(x[1]), infer::mul_dims(x[2], b), infer::mul_dims(x[3], b)})};
  }
  for (size_t d = 2; d < 4; ++d)
    if (x[d] >= 0 && x[d] % b != 0)
      ctx.fail("dimension " + std::to_string(d) + " of " + x.to_string() +
               " is not a multiple of blocksize " + std::to_string(b));
  auto div = [&](int64_t d) { return d < 0 ? d : d / b; };
  return {infer::value_info(ctx.type(0),
                            Shape{x[0], infer::mul_dims(x[1], b * b), div(x[2]), div(x[3])})};
}

std::vector<ValueInfo> infer_size(const ShapeInferContext& ctx) {
  return {infer::value_info(ElementType::i64, Shape{})};
}

std::vector<ValueInfo> infer_trilu(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  if (ctx.shape(0).rank() < 2)
    ctx.fail("input must have rank >= 2, got shape " + ctx.shape(0).to_string());
  if (ctx.has_input(1)) {
    infer::require_type(ctx, 1, TypeClass::index);
    const Shape& k = ctx.shape(1);
    if (k.is_static() && k.element_count() != 1)
      ctx.fail("k must be a scalar, got shape " + k.to_string());
  }
  return {infer::value_info(ctx.type(0), ctx.shape(0))};
}

std::vector<ValueInfo> infer_gather_elements(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  infer::require_type(ctx, 1, TypeClass::index);
  const Shape& data = ctx.shape(0);
  const Shape& indices = ctx.shape(1);
  if (data.rank() == 0) ctx.fail("data must have rank >= 1, got a scalar");
  if (indices.rank() != data.rank())
    ctx.fail("indices " + indices.to_string() + " must have the rank of data " + data.to_string());
  infer::normalize_axis(ctx, ctx.node.attributes.get_int_or("axis", 0), data.rank());
  return {infer::value_info(ctx.type(0), indices)};
}

// ScatterND and ScatterElements combine each update with its target by `reduction`.
void check_scatter_reduction(const ShapeInferContext& ctx) {
  const std::string reduction = ctx.node.attributes.get_string_or("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
      reduction != "min")
    ctx.fail("attribute reduction is '" + reduction + "', expected none, add, mul, max or min");
}

// ScatterND(data, indices, updates): indices [..., k] address slices data[i_0, ..., i_k-1, :...];
// updates has the shape indices[:-1] + data[k:]. The output is data with those slices replaced
// (or combined by `reduction`).
std::vector<ValueInfo> infer_scatter_nd(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  infer::require_type(ctx, 1, TypeClass::index);
  infer::require_same_type(ctx, 0, 2);
  check_scatter_reduction(ctx);
  const Shape& data = ctx.shape(0);
  const Shape& indices = ctx.shape(1);
  const Shape& updates = ctx.shape(2);
  if (data.rank() == 0) ctx.fail("data must have rank >= 1, got a scalar");
  if (indices.rank() == 0) ctx.fail("indices must have rank >= 1, got a scalar");
  const int64_t k = indices[indices.rank() - 1];
  if (k != Shape::dynamic) {
    if (k < 1 || static_cast<size_t>(k) > data.rank())
      ctx.fail("the last dimension of indices " + indices.to_string() + " must be 1.." +
               std::to_string(data.rank()) + " (the rank of data " + data.to_string() + ")");
    std::vector<int64_t> expected(indices.dims().begin(), indices.dims().end() - 1);
    expected.insert(expected.end(), data.dims().begin() + k, data.dims().end());
    bool ok = updates.rank() == expected.size();
    for (size_t i = 0; ok && i < expected.size(); ++i)
      ok = updates[i] == Shape::dynamic || expected[i] == Shape::dynamic ||
           updates[i] == expected[i];
    if (!ok)
      ctx.fail("updates " + updates.to_string() + " must have the shape " +
               Shape(expected).to_string() + " (indices " + indices.to_string() +
               " without its last dimension, then data " + data.to_string() + " from axis " +
               std::to_string(k) + ")");
  }
  return {infer::value_info(ctx.type(0), data)};
}

// GatherND(data, indices): the first batch_dims dimensions of data and indices pair up; each
// tuple of the last dimension of indices (length k) addresses the slice data[batch..., i_0, ...,
// i_k-1, :...]. Output shape: indices without its last dimension, then data from axis
// batch_dims + k.
std::vector<ValueInfo> infer_gather_nd(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  infer::require_type(ctx, 1, TypeClass::index);
  const Shape& data = ctx.shape(0);
  const Shape& indices = ctx.shape(1);
  if (data.rank() == 0) ctx.fail("data must have rank >= 1, got a scalar");
  if (indices.rank() == 0) ctx.fail("indices must have rank >= 1, got a scalar");
  const int64_t batch_dims = ctx.node.attributes.get_int_or("batch_dims", 0);
  const auto b = static_cast<size_t>(batch_dims);
  if (batch_dims < 0 || b >= std::min(data.rank(), indices.rank()))
    ctx.fail("batch_dims " + std::to_string(batch_dims) + " must be in 0.." +
             std::to_string(std::min(data.rank(), indices.rank()) - 1) + " for data " +
             data.to_string() + " and indices " + indices.to_string());
  for (size_t d = 0; d < b; ++d)
    if (data[d] != Shape::dynamic && indices[d] != Shape::dynamic && data[d] != indices[d])
      ctx.fail("batch dimension " + std::to_string(d) + " differs: data " + data.to_string() +
               " and indices " + indices.to_string() + " (batch_dims " +
               std::to_string(batch_dims) + ")");
  const int64_t k = indices[indices.rank() - 1];
  if (k == Shape::dynamic)
    infer::unsupported(ctx, "the last dimension of indices " + indices.to_string() +
                                " is dynamic, so the output's rank is unknown");
  if (k < 1 || static_cast<size_t>(k) > data.rank() - b)
    ctx.fail("the last dimension of indices " + indices.to_string() + " must be 1.." +
             std::to_string(data.rank() - b) + " (the rank of data " + data.to_string() +
             " minus batch_dims " + std::to_string(batch_dims) + ")");
  std::vector<int64_t> out(indices.dims().begin(), indices.dims().end() - 1);
  out.insert(out.end(), data.dims().begin() + static_cast<std::ptrdiff_t>(b + k),
             data.dims().end());
  return {infer::value_info(ctx.type(0), Shape(std::move(out)))};
}

// ScatterElements(data, indices, updates) and the deprecated Scatter: updates[idx] goes to
// data[idx with idx[axis] replaced by indices[idx]]. indices and updates share a shape, of data's
// rank.
std::vector<ValueInfo> infer_scatter_elements(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  infer::require_type(ctx, 1, TypeClass::index);
  infer::require_same_type(ctx, 0, 2);
  check_scatter_reduction(ctx);
  const Shape& data = ctx.shape(0);
  const Shape& indices = ctx.shape(1);
  const Shape& updates = ctx.shape(2);
  if (data.rank() == 0) ctx.fail("data must have rank >= 1, got a scalar");
  if (indices.rank() != data.rank())
    ctx.fail("indices " + indices.to_string() + " must have the rank of data " + data.to_string());
  const size_t axis =
      infer::normalize_axis(ctx, ctx.node.attributes.get_int_or("axis", 0), data.rank());
  bool same = updates.rank() == indices.rank();
  for (size_t d = 0; same && d < indices.rank(); ++d)
    same = updates[d] == Shape::dynamic || indices[d] == Shape::dynamic || updates[d] == indices[d];
  if (!same)
    ctx.fail("updates " + updates.to_string() + " must have the shape of indices " +
             indices.to_string());
  // Off the axis an index addresses data at its own position, so it must lie inside data.
  for (size_t d = 0; d < data.rank(); ++d)
    if (d != axis && data[d] != Shape::dynamic && indices[d] != Shape::dynamic &&
        indices[d] > data[d])
      ctx.fail("indices " + indices.to_string() + " exceed data " + data.to_string() +
               " in dimension " + std::to_string(d) + " (the scatter axis is " +
               std::to_string(axis) + ")");
  return {infer::value_info(ctx.type(0), data)};
}

// A scalar input, or a 1-D one holding one element (OneHot's depth).
void require_one_element(const ShapeInferContext& ctx, size_t i, const std::string& what) {
  const Shape& s = ctx.shape(i);
  if (s.rank() > 1 || (s.is_static() && s.element_count() != 1))
    ctx.fail(what + " (" + infer::input_label(ctx, i) +
             ") must be a scalar or hold exactly one element, got shape " + s.to_string());
}

// OneHot(indices, depth, values): a new axis of size depth inserted at `axis`; values = [off, on].
std::vector<ValueInfo> infer_one_hot(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::numeric);
  infer::require_type(ctx, 1, TypeClass::numeric);
  infer::require_type(ctx, 2, TypeClass::any);
  require_one_element(ctx, 1, "depth");
  const Shape& values = ctx.shape(2);
  if (values.rank() != 1 || (values[0] != Shape::dynamic && values[0] != 2))
    ctx.fail("values (" + infer::input_label(ctx, 2) +
             ") must be 1-D with two elements [off_value, on_value], got shape " +
             values.to_string());
  const Shape& indices = ctx.shape(0);
  const size_t axis =
      infer::normalize_axis(ctx, ctx.node.attributes.get_int_or("axis", -1), indices.rank() + 1);
  // The depth sizes the output: known when it is a constant, dynamic otherwise.
  int64_t depth = Shape::dynamic;
  if (const Tensor* t = ctx.constant(1)) {
    const double d = t->value_at(0);
    if (!(d >= 0)) ctx.fail("depth must not be negative, got " + std::to_string(d));
    depth = static_cast<int64_t>(d);
  }
  std::vector<int64_t> out = indices.dims();
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(axis), depth);
  return {infer::value_info(ctx.type(2), Shape(std::move(out)))};
}

// EyeLike(input): a 2-D tensor of input's shape with ones on the diagonal k, in `dtype` (an ONNX
// data type number) or the input's type.
std::vector<ValueInfo> infer_eye_like(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  infer::require_rank(ctx, 0, 2);
  ElementType type = ctx.type(0);
  if (ctx.node.attributes.has("dtype")) {
    const int64_t dtype = ctx.node.attributes.get_int("dtype");
    type = infer::from_onnx_data_type(dtype);
    if (type == ElementType::undefined)
      infer::unsupported(ctx, "attribute 'dtype' = " + std::to_string(dtype) +
                                  " is not a supported ONNX data type (supported: 1 f32, 2 u8, "
                                  "3 i8, 6 i32, 7 i64, 9 bool, 10 f16, 11 f64, 16 bf16)");
  }
  return {infer::value_info(type, ctx.shape(0))};
}

// ReverseSequence(input, sequence_lens): along time_axis, the first sequence_lens[b] elements of
// each batch entry b (along batch_axis) reversed.
std::vector<ValueInfo> infer_reverse_sequence(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  infer::require_type(ctx, 1, TypeClass::index);
  const Shape& in = ctx.shape(0);
  if (in.rank() < 2) ctx.fail("input must have rank >= 2, got shape " + in.to_string());
  const int64_t batch_axis = ctx.node.attributes.get_int_or("batch_axis", 1);
  const int64_t time_axis = ctx.node.attributes.get_int_or("time_axis", 0);
  if ((batch_axis != 0 && batch_axis != 1) || (time_axis != 0 && time_axis != 1) ||
      batch_axis == time_axis)
    ctx.fail("batch_axis " + std::to_string(batch_axis) + " and time_axis " +
             std::to_string(time_axis) + " must be 0 and 1 in some order");
  infer::require_rank(ctx, 1, 1);
  const int64_t batch = in[static_cast<size_t>(batch_axis)];
  const int64_t lens = ctx.shape(1)[0];
  if (batch != Shape::dynamic && lens != Shape::dynamic && batch != lens)
    ctx.fail("sequence_lens has " + std::to_string(lens) + " entries but the batch axis " +
             std::to_string(batch_axis) + " of input " + in.to_string() + " has size " +
             std::to_string(batch));
  return {infer::value_info(ctx.type(0), in)};
}

}  // namespace

void register_shape_ops(OpSchemaRegistry& registry) {
  registry.add(OpSchema{"Reshape", 2, 2, 1, 1, infer_reshape});
  registry.add(OpSchema{"Flatten", 1, 1, 1, 1, infer_flatten});
  registry.add(OpSchema{"Transpose", 1, 1, 1, 1, infer_transpose});
  registry.add(OpSchema{"Concat", 1, unbounded, 1, 1, infer_concat});
  registry.add(OpSchema{"Identity", 1, 1, 1, 1, same_as_input});
  registry.add(OpSchema{"Squeeze", 1, 2, 1, 1, infer_squeeze});
  registry.add(OpSchema{"Unsqueeze", 1, 2, 1, 1, infer_unsqueeze});
  registry.add(OpSchema{"Expand", 2, 2, 1, 1, infer_expand});
  registry.add(OpSchema{"Tile", 2, 2, 1, 1, infer_tile});
  registry.add(OpSchema{"Shape", 1, 1, 1, 1, infer_shape});
  registry.add(OpSchema{"ConstantOfShape", 1, 1, 1, 1, infer_constant_of_shape});
  registry.add(OpSchema{"Range", 3, 3, 1, 1, infer_range});
  registry.add(OpSchema{"Gather", 2, 2, 1, 1, infer_gather});
  registry.add(OpSchema{"Slice", 1, 5, 1, 1, infer_slice});
  registry.add(OpSchema{"ScatterND", 3, 3, 1, 1, infer_scatter_nd});
  registry.add(OpSchema{"Split", 1, 2, 1, unbounded, infer_split});
  registry.add(OpSchema{"Dropout", 1, 3, 1, 2, infer_dropout});
  registry.add(OpSchema{"Pad", 1, 4, 1, 1, infer_pad});
  registry.add(OpSchema{"Size", 1, 1, 1, 1, infer_size});
  registry.add(OpSchema{"Trilu", 1, 2, 1, 1, infer_trilu});
  registry.add(OpSchema{"GatherElements", 2, 2, 1, 1, infer_gather_elements});
  registry.add(OpSchema{"DepthToSpace", 1, 1, 1, 1,
                        [](const ShapeInferContext& ctx) { return infer_depth_space(ctx, true); }});
  registry.add(OpSchema{"SpaceToDepth", 1, 1, 1, 1, [](const ShapeInferContext& ctx) {
                          return infer_depth_space(ctx, false);
                        }});
  registry.add(OpSchema{"GatherND", 2, 2, 1, 1, infer_gather_nd});
  registry.add(OpSchema{"ScatterElements", 3, 3, 1, 1, infer_scatter_elements});
  registry.add(OpSchema{"Scatter", 3, 3, 1, 1, infer_scatter_elements});
  registry.add(OpSchema{"OneHot", 3, 3, 1, 1, infer_one_hot});
  registry.add(OpSchema{"EyeLike", 1, 1, 1, 1, infer_eye_like});
  registry.add(OpSchema{"ReverseSequence", 2, 2, 1, 1, infer_reverse_sequence});
}

}  // namespace troupe
