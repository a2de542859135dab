// Reference kernels of NonZero, Compress, Unique and NonMaxSuppression: they write what
// engine/ops/selection.hpp selects. Their outputs arrive sized by shape inference run on the same
// data (a constant, or the run's own inputs), so a size that disagrees is a bug, not bad input.

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops/selection.hpp"
#include "kernels/reference/common.hpp"
#include "kernels/reference/reference.hpp"

namespace troupe::kernels::reference {

namespace {

using Tensors = std::vector<Tensor>;

void write_ints(const Node& node, Tensor& out, const std::vector<int64_t>& values) {
  require_output_size(node, out, static_cast<int64_t>(values.size()));
  if (!values.empty())
    std::memcpy(out.data<int64_t>(), values.data(), values.size() * sizeof(int64_t));
}

// Copies slice `from` along the axis (geometry outer x count x inner, in elements) of `src` to
// slice `to` of `dst`, whose axis has `dst_count` slices.
void copy_slice(const Tensor& src, Tensor& dst, int64_t outer, int64_t count, int64_t inner,
                int64_t from, int64_t dst_count, int64_t to) {
  const size_t es = element_size(src.element_type());
  const auto* s = static_cast<const uint8_t*>(src.raw_data());
  auto* d = static_cast<uint8_t*>(dst.raw_data());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(d + static_cast<size_t>((o * dst_count + to) * inner) * es,
                s + static_cast<size_t>((o * count + from) * inner) * es,
                static_cast<size_t>(inner) * es);
}

std::optional<int64_t> as_axis(std::optional<size_t> axis) {
  return axis ? std::optional<int64_t>(static_cast<int64_t>(*axis)) : std::nullopt;
}

std::optional<size_t> axis_of(const Node& node, size_t rank) {
  if (!node.attributes.has("axis")) return std::nullopt;
  return normalize_axis(node, node.attributes.get_int("axis"), rank);
}

// [rank, count]: row d holds the d-th coordinate of every non-zero element.
void nonzero(const Node& node, const Tensors& in, Tensors& out) {
  const std::vector<int64_t> flat = selection::nonzero(in[0]);
  const std::vector<int64_t>& dims = in[0].shape().dims();
  std::vector<int64_t> coordinates(dims.size() * flat.size());
  for (size_t k = 0; k < flat.size(); ++k) {
    const std::vector<int64_t> index = unravel(flat[k], dims);
    for (size_t d = 0; d < dims.size(); ++d) coordinates[d * flat.size() + k] = index[d];
  }
  write_ints(node, out[0], coordinates);
}

void compress(const Node& node, const Tensors& in, Tensors& out) {
  const std::optional<size_t> axis = axis_of(node, in[0].shape().rank());
  const selection::SliceGeometry g = selection::slices_of(in[0].shape(), as_axis(axis));
  const std::vector<int64_t> kept = selection::compress(node, in[1], g.count);
  const auto count = static_cast<int64_t>(kept.size());
  require_output_size(node, out[0], g.outer * count * g.inner);
  for (int64_t k = 0; k < count; ++k)
    copy_slice(in[0], out[0], g.outer, g.count, g.inner, kept[static_cast<size_t>(k)], count, k);
}

void unique(const Node& node, const Tensors& in, Tensors& out) {
  const std::optional<size_t> axis = axis_of(node, in[0].shape().rank());
  const bool sorted = node.attributes.get_int_or("sorted", 1) != 0;
  const selection::SliceGeometry g = selection::slices_of(in[0].shape(), as_axis(axis));
  const selection::UniqueSlices u = selection::unique(node, in[0], as_axis(axis), sorted);
  const auto count = static_cast<int64_t>(u.first.size());
  require_output_size(node, out[0], g.outer * count * g.inner);
  for (int64_t k = 0; k < count; ++k)
    copy_slice(in[0], out[0], g.outer, g.count, g.inner, u.first[static_cast<size_t>(k)], count, k);
  if (out.size() > 1 && !out[1].empty()) write_ints(node, out[1], u.first);
  if (out.size() > 2 && !out[2].empty()) write_ints(node, out[2], u.inverse);
  if (out.size() > 3 && !out[3].empty()) write_ints(node, out[3], u.counts);
}

void non_max_suppression(const Node& node, const Tensors& in, Tensors& out) {
  const auto selected = selection::non_max_suppression(node, in);
  std::vector<int64_t> flat;
  for (const auto& triple : selected) flat.insert(flat.end(), triple.begin(), triple.end());
  write_ints(node, out[0], flat);
}

}  // namespace

void register_selection(KernelRegistry& registry) {
  const std::pair<const char*, ReferenceFn> kernels[] = {
      {"NonZero", &nonzero},
      {"Compress", &compress},
      {"Unique", &unique},
      {"NonMaxSuppression", &non_max_suppression}};
  for (const auto& [op_type, fn] : kernels)
    registry.add("reference", 0, op_type,
                 [fn = fn](const KernelRequest& r) { return make_reference_kernel(r.node, fn); });
}

}  // namespace troupe::kernels::reference
