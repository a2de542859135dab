// Folds a Pad that writes zeros around the spatial axes into the Conv or AveragePool that alone
// reads it, as their own pads: exporters write torch's avg_pool2d(padding=1,
// count_include_pad=True) as Pad then AveragePool (Inception-v3's pooling branches), and
// TensorFlow's and ZeroPad2d's padding as a Pad before the convolution. The padded copy of the
// tensor (Inception-v3: 1.6% of its time) is never made; the kernels pad as they read.
#include <string>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"

namespace troupe::transformations {

namespace {

// The Pad's pads ([x0_begin, x1_begin, ..., x0_end, ...]) when it writes zeros in constant mode
// on the whole tensor (no axes input) and its pads are constant and not negative; else empty.
std::vector<int64_t> zero_pads(const Model& model, const Node& pad) {
  if (pad.outputs.size() != 1 || pad.inputs.empty()) return {};
  if (pad.attributes.get_string_or("mode", "constant") != "constant") return {};
  if (pad.attributes.get_float_or("value", 0.0) != 0.0) return {};
  if (pad.inputs.size() > 3 && pad.inputs[3] != no_value) return {};  // axes (opset 18)
  if (pad.inputs.size() > 2 && pad.inputs[2] != no_value) {
    const ValueId value = pad.inputs[2];
    if (!model.is_constant(value)) return {};
    const Tensor& v = model.constants().at(value);
    if (v.size() != 1 || v.element_type() != model.value(pad.inputs[0]).type) return {};
    if (v.element_type() != ElementType::f32 || f32_scalar(model, value) != 0.0) return {};
  }
  std::vector<int64_t> pads;
  if (pad.inputs.size() > 1 && pad.inputs[1] != no_value) {
    if (!model.is_constant(pad.inputs[1])) return {};
    const Tensor& p = model.constants().at(pad.inputs[1]);
    if (p.element_type() != ElementType::i64) return {};
    pads = p.to_vector<int64_t>();
  } else {
    pads = pad.attributes.get_ints_or("pads", {});
  }
  for (int64_t p : pads)
    if (p < 0) return {};
  return pads;
}

}  // namespace

size_t fuse_pad_into_window(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    const int pad_index = static_cast<int>(i);
    const Node& pad = rewrite.node(pad_index);
    if (rewrite.removed(pad_index) || pad.op_type != "Pad") continue;
    const ValueInfo& x = model.value(pad.inputs[0]);
    const size_t rank = x.shape.rank();
    if (rank < 3 || (x.type != ElementType::f32 && x.type != ElementType::f64)) continue;
    const std::vector<int64_t> pads = zero_pads(model, pad);
    // Batch and channels unpadded: only the spatial axes are a window's to pad.
    if (pads.size() != 2 * rank || pads[0] != 0 || pads[1] != 0 || pads[rank] != 0 ||
        pads[rank + 1] != 0)
      continue;
    const int reader_index = rewrite.sole_reader(pad.outputs[0]);
    if (reader_index < 0) continue;
    Node window = rewrite.node(reader_index);
    if (window.inputs.empty() || window.inputs[0] != pad.outputs[0]) continue;
    if (std::count(window.inputs.begin(), window.inputs.end(), pad.outputs[0]) != 1) continue;
    if (window.attributes.get_string_or("auto_pad", "NOTSET") != "NOTSET") continue;
    const size_t spatial = rank - 2;
    std::vector<int64_t> window_pads =
        window.attributes.get_ints_or("pads", std::vector<int64_t>(2 * spatial, 0));
    if (window_pads.size() != 2 * spatial) continue;
    if (window.op_type == "AveragePool") {
      // The padded zeros count in every average, as in the unpadded pool over the padded input;
      // a pool that padded without counting its own pads would now count them. A window ceil
      // mode lets hang over the end would be cut differently.
      const bool own_pads =
          std::any_of(window_pads.begin(), window_pads.end(), [](int64_t p) { return p != 0; });
      if (window.attributes.get_int_or("ceil_mode", 0) != 0 ||
          (own_pads && window.attributes.get_int_or("count_include_pad", 0) == 0))
        continue;
      window.attributes.set("count_include_pad", int64_t{1});
    } else if (window.op_type != "Conv") {
      continue;
    }
    for (size_t d = 0; d < spatial; ++d) {
      window_pads[d] += pads[2 + d];
      window_pads[spatial + d] += pads[rank + 2 + d];
    }
    window.attributes.set("pads", window_pads);
    window.inputs[0] = pad.inputs[0];
    rewrite.replace(reader_index, std::move(window), {pad_index, reader_index});
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
