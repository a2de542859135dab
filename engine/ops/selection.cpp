// Schemas of NonZero, Compress, Unique and NonMaxSuppression (ONNX opset 11-13), and the
// selections they make (see selection.hpp for why those live here).
#include "engine/ops/selection.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"
#include "troupe/error.hpp"

namespace troupe {

namespace selection {

namespace {

[[noreturn]] void fail(const Node& node, const std::string& message) {
  throw ExecutionError(node.op_type + " node '" + node.name + "': " + message);
}

// A box of NonMaxSuppression as corners (y1 <= y2, x1 <= x2) and its area.
struct NmsBox {
  double y1, x1, y2, x2, area;
};

// IoU = intersection / union, 0 where either box has no area (ONNX's reference).
double intersection_over_union(const NmsBox& a, const NmsBox& b) {
  if (a.area <= 0 || b.area <= 0) return 0.0;
  const double h = std::max(0.0, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const double w = std::max(0.0, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const double intersection = h * w;
  return intersection / (a.area + b.area - intersection);
}

// The boxes one class has kept so far, and whether one of them suppresses a candidate (IoU above
// the threshold). Testing every kept box made NMS quadratic: exporters run one NMS over all
// classes at once, their boxes shifted apart (torchvision's batched_nms), so thousands are kept
// and each candidate overlaps a handful. With a threshold >= 0 only an overlapping box can
// suppress, so kept boxes are filed in a grid over the batch's extent and a candidate is tested
// against the boxes of the cells it covers (a box covering many cells is tested always). The
// answer is the same as testing all of them: two boxes that overlap share a cell.
class NmsKeptBoxes {
 public:
  NmsKeptBoxes(const std::vector<NmsBox>& boxes, double iou_threshold) : threshold_(iou_threshold) {
    double y_lo = 0, y_hi = 0, x_lo = 0, x_hi = 0;
    bool finite = !boxes.empty();
    for (size_t i = 0; i < boxes.size(); ++i) {
      const NmsBox& b = boxes[i];
      finite = finite && std::isfinite(b.y1) && std::isfinite(b.x1) && std::isfinite(b.y2) &&
               std::isfinite(b.x2);
      y_lo = i == 0 ? b.y1 : std::min(y_lo, b.y1);
      y_hi = i == 0 ? b.y2 : std::max(y_hi, b.y2);
      x_lo = i == 0 ? b.x1 : std::min(x_lo, b.x1);
      x_hi = i == 0 ? b.x2 : std::max(x_hi, b.x2);
    }
    // About one cell per 16 boxes, at most 128 x 128.
    const auto side = static_cast<int64_t>(std::sqrt(static_cast<double>(boxes.size()) / 16));
    side_ = std::clamp<int64_t>(side, 1, 128);
    // A negative threshold suppresses boxes that do not overlap: no grid then.
    if (!finite || threshold_ < 0 || side_ == 1 || !(y_hi > y_lo) || !(x_hi > x_lo)) side_ = 0;
    if (side_ > 0) {
      y_lo_ = y_lo;
      x_lo_ = x_lo;
      y_scale_ = static_cast<double>(side_) / (y_hi - y_lo);
      x_scale_ = static_cast<double>(side_) / (x_hi - x_lo);
      cells_.resize(static_cast<size_t>(side_ * side_));
    }
  }

  int64_t size() const { return count_; }

  void clear() {
    count_ = 0;
    everywhere_.clear();
    for (size_t cell : used_cells_) cells_[cell].clear();
    used_cells_.clear();
  }

  bool suppresses(const NmsBox& candidate) const {
    auto above = [&](const NmsBox& kept) {
      return intersection_over_union(kept, candidate) > threshold_;
    };
    if (std::any_of(everywhere_.begin(), everywhere_.end(), above)) return true;
    if (side_ == 0 || candidate.area <= 0) return false;
    const Span span = span_of(candidate);
    if (span.cells() > max_cells_per_box) return std::any_of(all_.begin(), all_.end(), above);
    for (int64_t y = span.y0; y <= span.y1; ++y)
      for (int64_t x = span.x0; x <= span.x1; ++x)
        for (const NmsBox& kept : cells_[static_cast<size_t>(y * side_ + x)])
          if (above(kept)) return true;
    return false;
  }

  void add(const NmsBox& box) {
    ++count_;
    // A box without area suppresses nothing.
    if (box.area <= 0) return;
    if (side_ == 0) {
      everywhere_.push_back(box);
      return;
    }
    all_.push_back(box);
    const Span span = span_of(box);
    if (span.cells() > max_cells_per_box) {
      everywhere_.push_back(box);
      return;
    }
    for (int64_t y = span.y0; y <= span.y1; ++y)
      for (int64_t x = span.x0; x <= span.x1; ++x) {
        const auto cell = static_cast<size_t>(y * side_ + x);
        if (cells_[cell].empty()) used_cells_.push_back(cell);
        cells_[cell].push_back(box);
      }
  }

 private:
  static constexpr int64_t max_cells_per_box = 64;
  struct Span {
    int64_t y0, x0, y1, x1;
    int64_t cells() const { return (y1 - y0 + 1) * (x1 - x0 + 1); }
  };
  // The cells a box covers; the mapping is monotone, so overlapping boxes share one.
  Span span_of(const NmsBox& b) const {
    auto cell = [&](double v, double lo, double scale) {
      return std::clamp<int64_t>(static_cast<int64_t>((v - lo) * scale), 0, side_ - 1);
    };
    return {cell(b.y1, y_lo_, y_scale_), cell(b.x1, x_lo_, x_scale_), cell(b.y2, y_lo_, y_scale_),
            cell(b.x2, x_lo_, x_scale_)};
  }

  double threshold_;
  int64_t side_ = 0;  // cells per axis; 0: no grid, every kept box is tested
  double y_lo_ = 0, x_lo_ = 0, y_scale_ = 0, x_scale_ = 0;
  int64_t count_ = 0;
  std::vector<NmsBox> everywhere_;  // tested for every candidate
  std::vector<NmsBox> all_;  // every kept box with an area (for a candidate covering many cells)
  std::vector<std::vector<NmsBox>> cells_;
  std::vector<size_t> used_cells_;
};

}  // namespace

SliceGeometry slices_of(const Shape& shape, std::optional<int64_t> axis) {
  SliceGeometry g;
  if (!axis) {
    g.count = shape.element_count();
    return g;
  }
  for (size_t d = 0; d < shape.rank(); ++d) {
    if (static_cast<int64_t>(d) < *axis)
      g.outer *= shape[d];
    else if (static_cast<int64_t>(d) == *axis)
      g.count = shape[d];
    else
      g.inner *= shape[d];
  }
  return g;
}

std::vector<int64_t> nonzero(const Tensor& x) {
  std::vector<int64_t> flat;
  for (int64_t i = 0; i < x.size(); ++i)
    if (x.value_at(i) != 0) flat.push_back(i);
  return flat;
}

std::vector<int64_t> compress(const Node& node, const Tensor& condition, int64_t length) {
  if (condition.size() > length)
    fail(node, "condition has " + std::to_string(condition.size()) +
                   " entries, more than the axis' " + std::to_string(length));
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < condition.size(); ++i)
    if (condition.value_at(i) != 0) kept.push_back(i);
  return kept;
}

UniqueSlices unique(const Node& node, const Tensor& x, std::optional<int64_t> axis, bool sorted) {
  const SliceGeometry g = slices_of(x.shape(), axis);
  const int64_t slice_size = g.outer * g.inner;
  // Slice k's values, in row-major order of the elements it holds.
  auto value = [&](int64_t k, int64_t e) {
    const int64_t o = e / g.inner;
    const int64_t i = e % g.inner;
    return x.value_at((o * g.count + k) * g.inner + i);
  };
  auto less = [&](int64_t a, int64_t b) {
    for (int64_t e = 0; e < slice_size; ++e) {
      const double va = value(a, e);
      const double vb = value(b, e);
      if (va != vb) return va < vb;
    }
    return false;
  };
  auto equal = [&](int64_t a, int64_t b) { return !less(a, b) && !less(b, a); };
  if (slice_size == 0 && g.count > 0) fail(node, "cannot compare empty slices");

  // Slices by value (ties by position), so equal slices are neighbours and the first of a run is
  // the first occurrence.
  std::vector<int64_t> order(static_cast<size_t>(g.count));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), less);
  UniqueSlices result;
  std::vector<int64_t> group_of(static_cast<size_t>(g.count));
  for (size_t r = 0; r < order.size(); ++r) {
    if (r == 0 || !equal(order[r - 1], order[r])) {
      result.first.push_back(order[r]);
      result.counts.push_back(0);
    }
    group_of[static_cast<size_t>(order[r])] = static_cast<int64_t>(result.first.size()) - 1;
    ++result.counts.back();
  }
  // Unsorted output lists the unique slices by first occurrence.
  std::vector<int64_t> rank(result.first.size());
  std::iota(rank.begin(), rank.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_position(result.first.size());
    std::iota(by_position.begin(), by_position.end(), 0);
    std::sort(by_position.begin(), by_position.end(), [&](int64_t a, int64_t b) {
      return result.first[static_cast<size_t>(a)] < result.first[static_cast<size_t>(b)];
    });
    UniqueSlices reordered;
    for (size_t r = 0; r < by_position.size(); ++r) {
      const auto u = static_cast<size_t>(by_position[r]);
      rank[u] = static_cast<int64_t>(r);
      reordered.first.push_back(result.first[u]);
      reordered.counts.push_back(result.counts[u]);
    }
    result.first = std::move(reordered.first);
    result.counts = std::move(reordered.counts);
  }
  for (int64_t k = 0; k < g.count; ++k)
    result.inverse.push_back(rank[static_cast<size_t>(group_of[static_cast<size_t>(k)])]);
  return result;
}

std::vector<std::array<int64_t, 3>> non_max_suppression(const Node& node,
                                                        const std::vector<Tensor>& inputs) {
  const Tensor& boxes = inputs.at(0);
  const Tensor& scores = inputs.at(1);
  auto scalar = [&](size_t i) -> std::optional<double> {
    if (i >= inputs.size() || inputs[i].empty()) return std::nullopt;
    if (inputs[i].size() != 1)
      fail(node, "input " + std::to_string(i) + " must hold one value, it has " +
                     std::to_string(inputs[i].size()));
    return inputs[i].value_at(0);
  };
  // Read exactly: exporters pass INT64_MAX for "no limit", which a double rounds past int64.
  int64_t max_per_class = 0;
  if (scalar(2)) {
    const Tensor& m = inputs[2];
    max_per_class = m.element_type() == ElementType::i64   ? m.data<int64_t>()[0]
                    : m.element_type() == ElementType::i32 ? m.data<int32_t>()[0]
                                                           : static_cast<int64_t>(m.value_at(0));
  }
  const double iou_threshold = scalar(3).value_or(0);
  const std::optional<double> score_threshold = scalar(4);
  const bool center = node.attributes.get_int_or("center_point_box", 0) != 0;
  const int64_t batches = boxes.shape()[0];
  const int64_t count = boxes.shape()[1];
  const int64_t classes = scores.shape()[1];
  if (scores.shape()[0] != batches || scores.shape()[2] != count)
    fail(node, "scores " + scores.shape().to_string() + " do not match boxes " +
                   boxes.shape().to_string());

  // The values as doubles, read once (the IoU below is the specification's arithmetic).
  const Tensor box_values = boxes.convert(ElementType::f64).contiguous();
  const Tensor score_values = scores.convert(ElementType::f64).contiguous();
  const double* all_boxes = box_values.data<double>();
  const double* all_scores = score_values.data<double>();

  // Every box of a batch as (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2, and its area: the same
  // for every class, so computed once per batch.
  std::vector<NmsBox> box(static_cast<size_t>(count));
  std::vector<std::array<int64_t, 3>> selected;
  std::vector<int64_t> candidates;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t i = 0; i < count; ++i) {
      const double* c = all_boxes + (b * count + i) * 4;
      NmsBox& x = box[static_cast<size_t>(i)];
      if (center) {  // (x_center, y_center, width, height)
        x = {c[1] - c[3] / 2, c[0] - c[2] / 2, c[1] + c[3] / 2, c[0] + c[2] / 2, 0};
      } else {
        x = {std::min(c[0], c[2]), std::min(c[1], c[3]), std::max(c[0], c[2]), std::max(c[1], c[3]),
             0};
      }
      x.area = (x.y2 - x.y1) * (x.x2 - x.x1);
    }
    NmsKeptBoxes kept(box, iou_threshold);
    for (int64_t c = 0; c < classes; ++c) {
      const double* score = all_scores + (b * classes + c) * count;
      candidates.clear();
      for (int64_t i = 0; i < count; ++i)
        if (!score_threshold || score[i] > *score_threshold) candidates.push_back(i);
      // Highest score first; equal scores keep the boxes' order.
      std::stable_sort(candidates.begin(), candidates.end(),
                       [&](int64_t x, int64_t y) { return score[x] > score[y]; });
      kept.clear();
      for (int64_t i : candidates) {
        if (kept.size() >= max_per_class) break;
        const NmsBox& candidate = box[static_cast<size_t>(i)];
        if (kept.suppresses(candidate)) continue;
        kept.add(candidate);
        selected.push_back({b, c, i});
      }
    }
  }
  return selected;
}

}  // namespace selection

namespace {

using infer::TypeClass;

std::vector<ValueInfo> infer_nonzero(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  const auto rank = static_cast<int64_t>(ctx.shape(0).rank());
  const Tensor* x = ctx.constant(0);
  const int64_t count = x ? static_cast<int64_t>(selection::nonzero(*x).size()) : Shape::dynamic;
  return {infer::value_info(ElementType::i64, Shape{rank, count})};
}

std::vector<ValueInfo> infer_compress(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  infer::require_type(ctx, 1, TypeClass::boolean);
  if (ctx.shape(1).rank() != 1)
    ctx.fail("condition must be 1-D, got shape " + ctx.shape(1).to_string());
  const Shape& x = ctx.shape(0);
  std::optional<size_t> axis;
  if (ctx.node.attributes.has("axis"))
    axis = infer::normalize_axis(ctx, ctx.node.attributes.get_int("axis"), x.rank());
  const int64_t length = axis ? x[*axis] : (x.is_static() ? x.element_count() : Shape::dynamic);
  int64_t kept = Shape::dynamic;
  if (const Tensor* condition = ctx.constant(1); condition && length >= 0) {
    if (condition->size() > length)
      ctx.fail("condition has " + std::to_string(condition->size()) +
               " entries, more than the axis' " + std::to_string(length));
    kept = static_cast<int64_t>(selection::compress(ctx.node, *condition, length).size());
  }
  if (!axis) return {infer::value_info(ctx.type(0), Shape{kept})};
  std::vector<int64_t> dims = x.dims();
  dims[*axis] = kept;
  return {infer::value_info(ctx.type(0), Shape(std::move(dims)))};
}

std::vector<ValueInfo> infer_unique(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  const Shape& x = ctx.shape(0);
  std::optional<int64_t> axis;
  if (ctx.node.attributes.has("axis"))
    axis = static_cast<int64_t>(
        infer::normalize_axis(ctx, ctx.node.attributes.get_int("axis"), x.rank()));
  const bool sorted = ctx.node.attributes.get_int_or("sorted", 1) != 0;
  int64_t count = Shape::dynamic;
  if (const Tensor* data = ctx.constant(0))
    count = static_cast<int64_t>(selection::unique(ctx.node, *data, axis, sorted).first.size());
  std::vector<int64_t> y_dims = axis ? x.dims() : std::vector<int64_t>{count};
  if (axis) y_dims[static_cast<size_t>(*axis)] = count;
  const int64_t length =
      axis ? x[static_cast<size_t>(*axis)] : (x.is_static() ? x.element_count() : Shape::dynamic);
  std::vector<ValueInfo> outs{infer::value_info(ctx.type(0), Shape(std::move(y_dims))),
                              infer::value_info(ElementType::i64, Shape{count}),
                              infer::value_info(ElementType::i64, Shape{length}),
                              infer::value_info(ElementType::i64, Shape{count})};
  outs.resize(ctx.node.outputs.size());
  return outs;
}

std::vector<ValueInfo> infer_non_max_suppression(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::floating);
  infer::require_same_type(ctx, 0, 1);
  const Shape& boxes = ctx.shape(0);
  const Shape& scores = ctx.shape(1);
  if (boxes.rank() != 3 || (boxes[2] >= 0 && boxes[2] != 4))
    ctx.fail("boxes must have shape [batches, boxes, 4], got " + boxes.to_string());
  if (scores.rank() != 3)
    ctx.fail("scores must have shape [batches, classes, boxes], got " + scores.to_string());
  for (auto [b, s] : {std::pair<size_t, size_t>{0, 0}, {1, 2}})
    if (boxes[b] >= 0 && scores[s] >= 0 && boxes[b] != scores[s])
      ctx.fail("scores " + scores.to_string() + " do not match boxes " + boxes.to_string());
  if (ctx.has_input(2)) infer::require_type(ctx, 2, TypeClass::index);
  for (size_t i = 3; i < 5; ++i)
    if (ctx.has_input(i)) infer::require_type(ctx, i, TypeClass::floating);
  const int64_t center = ctx.node.attributes.get_int_or("center_point_box", 0);
  if (center != 0 && center != 1)
    ctx.fail("attribute center_point_box is " + std::to_string(center) + ", expected 0 or 1");
  int64_t count = Shape::dynamic;
  std::vector<Tensor> data;
  bool all_known = true;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) {
      data.emplace_back();
    } else if (const Tensor* t = ctx.constant(i)) {
      data.push_back(*t);
    } else {
      all_known = false;
    }
  }
  if (all_known)
    count = static_cast<int64_t>(selection::non_max_suppression(ctx.node, data).size());
  return {infer::value_info(ElementType::i64, Shape{count, 3})};
}

}  // namespace

void register_selection_ops(OpSchemaRegistry& registry) {
  registry.add(OpSchema{"NonZero", 1, 1, 1, 1, infer_nonzero});
  registry.add(OpSchema{"Compress", 2, 2, 1, 1, infer_compress});
  registry.add(OpSchema{"Unique", 1, 1, 1, 4, infer_unique});
  registry.add(OpSchema{"NonMaxSuppression", 2, 5, 1, 1, infer_non_max_suppression});
}

}  // namespace troupe
