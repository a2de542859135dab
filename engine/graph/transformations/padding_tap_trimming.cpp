// Trims from a convolution's kernel the taps that read nothing but padding at every output
// position. A dilated convolution on a small feature map has such taps: DeepLabV3's ASPP branches
// (dilations 12, 24 and 36, padding as much) on the 20x20 map of a 320x320 image reach the image
// through the centre tap alone at dilations 24 and 36, so 8 of their 9 taps multiply padding
// zeros, and oneDNN has no fast kernel for a dilation that large on AVX2 (the three branches took
// 77% of the model's time there). Each dropped product was with a zero, so the trimmed
// convolution computes exactly the same values, and a kernel trimmed to 1x1 gets the 1x1
// kernels and fusions.
#include <cstring>
#include <string>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/transformations.hpp"
#include "engine/ops/fused_post_ops.hpp"
#include "engine/ops/spatial.hpp"

namespace troupe::transformations {

namespace {

// The taps [first, last] of one spatial axis that some output position reads inside the input;
// first > last when none does.
struct TapRange {
  int64_t first = 0, last = -1;
};

TapRange reached_taps(int64_t input, int64_t output, int64_t kernel, int64_t stride,
                      int64_t dilation, int64_t pad_begin) {
  TapRange range{kernel, -1};
  for (int64_t t = 0; t < kernel; ++t)
    for (int64_t y = 0; y < output; ++y) {
      const int64_t at = y * stride - pad_begin + t * dilation;
      if (at >= 0 && at < input) {
        range.first = std::min(range.first, t);
        range.last = std::max(range.last, t);
        break;
      }
    }
  return range;
}

// Copies the window [first, first + extent) of each spatial axis of the weights
// [OC, IC/group, k...] into a new tensor.
Tensor slice_kernel(const Tensor& weights, const std::vector<TapRange>& keep) {
  const Shape& from = weights.shape();
  std::vector<int64_t> dims = {from[0], from[1]};
  for (const TapRange& r : keep) dims.push_back(r.last - r.first + 1);
  Tensor sliced(weights.element_type(), Shape(dims));
  const size_t element = element_size(weights.element_type());
  const std::vector<int64_t> from_strides = row_major_strides(from);
  const std::vector<int64_t> to_strides = row_major_strides(sliced.shape());
  const auto* src = static_cast<const unsigned char*>(weights.raw_data());
  auto* dst = static_cast<unsigned char*>(sliced.raw_data());
  // Every element of the sliced tensor, its multi-index carried to the source's.
  const int64_t count = sliced.shape().element_count();
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, at = 0;
    for (size_t axis = 0; axis < dims.size(); ++axis) {
      const int64_t index = rest / to_strides[axis];
      rest %= to_strides[axis];
      const int64_t offset = axis >= 2 ? keep[axis - 2].first : 0;
      at += (index + offset) * from_strides[axis];
    }
    std::memcpy(dst + static_cast<size_t>(i) * element, src + static_cast<size_t>(at) * element,
                element);
  }
  return sliced;
}

}  // namespace

size_t trim_padding_taps(Model& model) {
  std::vector<Node> nodes = model.nodes();
  size_t trimmed = 0;
  for (Node& conv : nodes) {
    if (conv.op_type != "Conv" || fused::is_fused(conv) || conv.inputs.size() < 2 ||
        conv.outputs.size() != 1 || !model.is_constant(conv.inputs[1]))
      continue;
    const Shape& x = model.value(conv.inputs[0]).shape;
    const Tensor& weights = model.constants().at(conv.inputs[1]);
    const size_t rank = x.rank();
    if (rank < 3 || weights.shape().rank() != rank) continue;
    const std::vector<int64_t> input = spatial::spatial_dims(x);
    if (std::any_of(input.begin(), input.end(), [](int64_t d) { return d <= 0; })) continue;
    const std::vector<int64_t> kernel(weights.shape().begin() + 2, weights.shape().end());
    const spatial::Window window = spatial::read_window(conv, rank - 2, kernel);
    const spatial::Geometry g = spatial::forward_geometry(conv, window, input);

    std::vector<TapRange> keep;
    bool trims = false, keeps_all_axes = true;
    std::vector<int64_t> pads_begin = g.pads_begin, pads_end = g.pads_end;
    std::vector<int64_t> dilations = window.dilations;
    for (size_t i = 0; i < input.size(); ++i) {
      const TapRange r = reached_taps(input[i], g.output[i], kernel[i], window.strides[i],
                                      window.dilations[i], g.pads_begin[i]);
      // An axis no tap reaches leaves only the bias: rare, and left to the kernel as written.
      if (r.first > r.last || g.output[i] <= 0) keeps_all_axes = false;
      pads_begin[i] -= r.first * window.dilations[i];
      pads_end[i] -= (kernel[i] - 1 - r.last) * window.dilations[i];
      if (r.first > 0 || r.last < kernel[i] - 1) trims = true;
      if (r.first == r.last) dilations[i] = 1;  // one tap: its dilation means nothing
      keep.push_back(r);
    }
    // A trimmed kernel that would need negative padding (a tap past the first one reaching the
    // image before the first output) is left as it is.
    const auto negative = [](const std::vector<int64_t>& v) {
      return std::any_of(v.begin(), v.end(), [](int64_t p) { return p < 0; });
    };
    if (!trims || !keeps_all_axes || negative(pads_begin) || negative(pads_end)) continue;

    std::vector<int64_t> trimmed_kernel, pads = pads_begin;
    for (const TapRange& r : keep) trimmed_kernel.push_back(r.last - r.first + 1);
    pads.insert(pads.end(), pads_end.begin(), pads_end.end());
    Node candidate = conv;
    candidate.attributes.set("kernel_shape", trimmed_kernel);
    candidate.attributes.set("pads", pads);
    candidate.attributes.set("dilations", dilations);
    candidate.attributes.set("auto_pad", std::string("NOTSET"));
    // The output size must not change (it cannot, by the padding arithmetic above; checked all
    // the same, as the rewrite is only worth doing exactly).
    const spatial::Window trimmed_window =
        spatial::read_window(candidate, rank - 2, trimmed_kernel);
    if (spatial::forward_geometry(candidate, trimmed_window, input).output != g.output) continue;
    candidate.inputs[1] = model.add_constant(
        unique_value_name(model, conv.name + "/trimmed_weights"), slice_kernel(weights, keep));
    conv = std::move(candidate);
    ++trimmed;
  }
  if (trimmed == 0) return 0;
  model.set_nodes(std::move(nodes));
  model.validate();
  return trimmed;
}

}  // namespace troupe::transformations
