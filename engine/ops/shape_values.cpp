// Partial evaluation of the small integer lists exporters compute from shapes. With a dynamic
// batch, torch writes `x.reshape(x.shape[0], groups, -1, h, w)` as
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape; the batch is unknown until run time, but the
// other entries are not, and shape inference keeps them.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops/op_schema.hpp"

namespace troupe {

namespace {

// Lists longer than this are not shapes; they are not tracked.
constexpr int64_t max_tracked_elements = 64;

bool is_tracked_type(ElementType type) {
  return type == ElementType::i64 || type == ElementType::i32 || type == ElementType::boolean;
}

// The values of input i as far as known: a small integer constant, or a tracked partial list.
std::optional<PartialInts> input_values(const ShapeInferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return std::nullopt;
  if (const PartialInts* partial = ctx.partial(i)) return *partial;
  const Tensor* t = ctx.constant(i);
  if (t == nullptr || t->shape().rank() > 1 || t->size() > max_tracked_elements)
    return std::nullopt;
  PartialInts values;
  switch (t->element_type()) {
    case ElementType::i64:
      for (int64_t v : t->to_vector<int64_t>()) values.emplace_back(v);
      break;
    case ElementType::i32:
      for (int32_t v : t->to_vector<int32_t>()) values.emplace_back(v);
      break;
    case ElementType::boolean:
      for (bool v : t->to_vector<bool>()) values.emplace_back(v ? 1 : 0);
      break;
    default:
      return std::nullopt;
  }
  return values;
}

// Constant integer input i, or nullopt when it is missing or not fully known.
std::optional<std::vector<int64_t>> known_ints(const ShapeInferContext& ctx, size_t i) {
  auto values = input_values(ctx, i);
  if (!values) return std::nullopt;
  std::vector<int64_t> ints;
  for (const auto& v : *values) {
    if (!v) return std::nullopt;
    ints.push_back(*v);
  }
  return ints;
}

std::optional<PartialInts> shape_of(const ShapeInferContext& ctx) {
  const Shape& shape = ctx.shape(0);
  const auto rank = static_cast<int64_t>(shape.rank());
  auto clamp = [rank](int64_t axis) {
    return std::clamp<int64_t>(axis < 0 ? axis + rank : axis, 0, rank);
  };
  const int64_t start = clamp(ctx.node.attributes.get_int_or("start", 0));
  const int64_t end = clamp(ctx.node.attributes.get_int_or("end", rank));
  PartialInts values;
  for (int64_t i = start; i < end; ++i) {
    const int64_t d = shape[static_cast<size_t>(i)];
    values.push_back(d == Shape::dynamic ? std::nullopt : std::optional<int64_t>(d));
  }
  return values;
}

std::optional<PartialInts> gather(const ShapeInferContext& ctx) {
  if (ctx.node.attributes.get_int_or("axis", 0) != 0) return std::nullopt;
  auto data = input_values(ctx, 0);
  auto indices = known_ints(ctx, 1);
  if (!data || !indices || ctx.shape(0).rank() != 1) return std::nullopt;
  PartialInts values;
  const auto n = static_cast<int64_t>(data->size());
  for (int64_t index : *indices) {
    if (index < -n || index >= n) return std::nullopt;  // shape inference reports it
    values.push_back((*data)[static_cast<size_t>(index < 0 ? index + n : index)]);
  }
  return values;
}

std::optional<PartialInts> concat(const ShapeInferContext& ctx) {
  PartialInts values;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    auto part = input_values(ctx, i);
    if (!part) return std::nullopt;
    values.insert(values.end(), part->begin(), part->end());
  }
  return values;
}

std::optional<PartialInts> slice(const ShapeInferContext& ctx) {
  auto data = input_values(ctx, 0);
  auto starts = known_ints(ctx, 1);
  auto ends = known_ints(ctx, 2);
  if (!data || !starts || !ends || starts->size() != 1 || ends->size() != 1) return std::nullopt;
  if (ctx.has_input(3)) {
    auto axes = known_ints(ctx, 3);
    if (!axes || axes->size() != 1 || ((*axes)[0] != 0 && (*axes)[0] != -1)) return std::nullopt;
  }
  int64_t step = 1;
  if (ctx.has_input(4)) {
    auto steps = known_ints(ctx, 4);
    if (!steps || steps->size() != 1 || (*steps)[0] == 0) return std::nullopt;
    step = (*steps)[0];
  }
  const auto n = static_cast<int64_t>(data->size());
  auto clamp = [n, step](int64_t v) {
    if (v < 0) v += n;
    return step > 0 ? std::clamp<int64_t>(v, 0, n) : std::clamp<int64_t>(v, -1, n - 1);
  };
  PartialInts values;
  const int64_t start = clamp((*starts)[0]);
  const int64_t end = clamp((*ends)[0]);
  for (int64_t i = start; step > 0 ? i < end : i > end; i += step)
    values.push_back((*data)[static_cast<size_t>(i)]);
  return values;
}

std::optional<PartialInts> arithmetic(const ShapeInferContext& ctx) {
  auto a = input_values(ctx, 0);
  auto b = input_values(ctx, 1);
  if (!a || !b) return std::nullopt;
  const size_t n = std::max(a->size(), b->size());
  if ((a->size() != n && a->size() != 1) || (b->size() != n && b->size() != 1)) return std::nullopt;
  const std::string& op = ctx.node.op_type;
  PartialInts values;
  for (size_t i = 0; i < n; ++i) {
    const auto& x = (*a)[a->size() == 1 ? 0 : i];
    const auto& y = (*b)[b->size() == 1 ? 0 : i];
    if (!x || !y) {
      // 0 times anything is 0: torch multiplies a shape by a mask of known zeros.
      values.push_back(op == "Mul" && ((x && *x == 0) || (y && *y == 0)) ? std::optional<int64_t>(0)
                                                                         : std::nullopt);
      continue;
    }
    if (op == "Add") {
      values.emplace_back(*x + *y);
    } else if (op == "Sub") {
      values.emplace_back(*x - *y);
    } else if (op == "Mul") {
      values.emplace_back(*x * *y);
    } else if (op == "Div") {
      if (*y == 0) return std::nullopt;
      values.emplace_back(*x / *y);
    } else if (op == "Equal") {
      values.emplace_back(*x == *y ? 1 : 0);
    } else {
      return std::nullopt;
    }
  }
  return values;
}

std::optional<PartialInts> where(const ShapeInferContext& ctx) {
  auto condition = input_values(ctx, 0);
  auto x = input_values(ctx, 1);
  auto y = input_values(ctx, 2);
  if (!condition || !x || !y) return std::nullopt;
  const size_t n = std::max({condition->size(), x->size(), y->size()});
  for (size_t size : {condition->size(), x->size(), y->size()})
    if (size != n && size != 1) return std::nullopt;
  auto at = [](const PartialInts& v, size_t i) { return v[v.size() == 1 ? 0 : i]; };
  PartialInts values;
  for (size_t i = 0; i < n; ++i) {
    const auto c = at(*condition, i);
    values.push_back(!c ? std::nullopt : *c ? at(*x, i) : at(*y, i));
  }
  return values;
}

}  // namespace

std::optional<PartialInts> infer_partial_value(const ShapeInferContext& ctx,
                                               const ValueInfo& output) {
  if (!is_tracked_type(output.type) || output.shape.rank() > 1 || !output.shape.is_static() ||
      output.shape.element_count() > max_tracked_elements)
    return std::nullopt;
  const std::string& op = ctx.node.op_type;
  std::optional<PartialInts> values;
  if (op == "Shape") {
    values = shape_of(ctx);
  } else if (op == "Gather") {
    values = gather(ctx);
  } else if (op == "Concat") {
    values = concat(ctx);
  } else if (op == "Slice") {
    values = slice(ctx);
  } else if (op == "Unsqueeze" || op == "Squeeze" || op == "Identity" || op == "Reshape" ||
             op == "Flatten" || op == "Cast") {
    values = input_values(ctx, 0);
  } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal") {
    values = arithmetic(ctx);
  } else if (op == "Where") {
    values = where(ctx);
  }
  // A list whose length disagrees with the inferred shape is not tracked. One whose entries are
  // all unknown still is: a Concat of it with known entries knows those.
  if (!values || static_cast<int64_t>(values->size()) != output.shape.element_count())
    return std::nullopt;
  return values;
}

}  // namespace troupe
