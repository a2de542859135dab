// RoiAlign in f32: the reference computes in double, converts the whole feature map to doubles on
// every run and recomputes each sample's position and weights for every channel: 36 ms for a
// Faster R-CNN box head's 100 boxes of 7x7 bins over a [1, 256, 50, 68] map, 73% of its time
// (ONNX Runtime: 6 ms). Here the map is laid out channels-last once per run, each box's sample
// positions and weights come from the reference's own geometry (kernels/reference/
// roi_geometry.hpp, in double, so a sample reads the same pixels with the same weights), and every
// sample adds its four taps to a bin's whole channel vector at once; boxes are spread over the
// stream's threads.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/team.hpp"
#include "kernels/dnnl/vector_exp.hpp"  // TROUPE_ISA_CLONES
#include "kernels/layout_conversion.hpp"
#include "kernels/reference/roi_geometry.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

using reference::RoiAlignSettings;
using reference::RoiBins;
using reference::RoiSample;

// One tap of a bin: a pixel (its offset in the channels-last image, in floats) and its weight.
struct Tap {
  int64_t offset;
  float weight;
};

// acc[c] = sum of taps' weight x pixel[c] ("avg", unscaled) or their maximum ("max").
TROUPE_ISA_CLONES void gather_bin(const float* image, const Tap* taps, int64_t count,
                                  int64_t channels, bool max_mode, float* acc) {
  if (max_mode) {
    for (int64_t c = 0; c < channels; ++c) acc[c] = -std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < count; ++t) {
      const float* p = image + taps[t].offset;
      const float w = taps[t].weight;
      for (int64_t c = 0; c < channels; ++c) acc[c] = std::max(acc[c], w * p[c]);
    }
    return;
  }
  for (int64_t c = 0; c < channels; ++c) acc[c] = 0.f;
  for (int64_t t = 0; t < count; ++t) {
    const float* p = image + taps[t].offset;
    const float w = taps[t].weight;
    for (int64_t c = 0; c < channels; ++c) acc[c] += w * p[c];
  }
}

class RoiAlignKernel final : public Kernel {
 public:
  explicit RoiAlignKernel(const KernelRequest& r) : node_(r.node), settings_(r.node) {
    if (r.inputs.size() != 3 || r.outputs.size() != 1 || r.inputs[0].type != ElementType::f32 ||
        r.inputs[1].type != ElementType::f32 || r.outputs[0].type != ElementType::f32 ||
        !r.input_layout(0).is_plain() || !r.output_layout(0).is_plain())
      throw Unsupported{};
    if (r.inputs[0].shape.rank() != 4 || settings_.out_h < 1 || settings_.out_w < 1)
      throw Unsupported{};
  }

  std::string implementation() const override { return "dnnl:roi_align"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const std::vector<int64_t>& dims = in[0].shape().dims();
    const int64_t batch = dims[0], channels = dims[1], height = dims[2], width = dims[3];
    const Tensor boxes = in[1].contiguous();
    const Tensor indices = in[2].contiguous();
    const int64_t rois = indices.size();
    if (boxes.shape().rank() != 2 || boxes.shape()[1] != 4 || boxes.shape()[0] != rois)
      fail("rois " + boxes.shape().to_string() + " must be [" + std::to_string(rois) +
           ", 4], one box per batch index");
    std::vector<int64_t> image_of(static_cast<size_t>(rois));
    for (int64_t r = 0; r < rois; ++r) {
      const auto b = static_cast<int64_t>(indices.value_at(r));
      if (b < 0 || b >= batch)
        fail("batch index " + std::to_string(b) + " of roi " + std::to_string(r) +
             " is outside [0, " + std::to_string(batch) + ")");
      image_of[static_cast<size_t>(r)] = b;
    }
    const int64_t bins = settings_.out_h * settings_.out_w;
    if (rois == 0 || channels == 0) return;
    if (nhwc_.shape() != in[0].shape()) nhwc_ = Tensor(ElementType::f32, in[0].shape());
    convert_layout(in[0].contiguous(), {}, nhwc_, TensorLayout::channels_last_order());
    const float* box_values = boxes.data<float>();
    float* y = out[0].data<float>();
    const int64_t pixels = height * width;
    run_team_if(rois > 1 && rois * bins * channels > (int64_t{1} << 14), [&] {
      std::vector<Tap> taps;
      std::vector<float> acc(static_cast<size_t>(bins * channels));
#pragma omp for schedule(dynamic, 1)
      for (int64_t r = 0; r < rois; ++r) {
        double box[4];
        for (int k = 0; k < 4; ++k) box[k] = box_values[r * 4 + k];
        const RoiBins geometry(settings_, box);
        const float* image =
            nhwc_.data<float>() + image_of[static_cast<size_t>(r)] * pixels * channels;
        for (int64_t ph = 0; ph < settings_.out_h; ++ph)
          for (int64_t pw = 0; pw < settings_.out_w; ++pw) {
            taps.clear();
            for (int64_t iy = 0; iy < geometry.grid_h; ++iy)
              for (int64_t ix = 0; ix < geometry.grid_w; ++ix) {
                const RoiSample s = geometry.sample(ph, pw, iy, ix, height, width);
                // A sample off the map adds nothing to "avg"; in "max" its zero weights make it
                // a 0 among the candidates, as in the reference.
                if (!settings_.max_mode && s.weight[0] == 0 && s.weight[1] == 0 &&
                    s.weight[2] == 0 && s.weight[3] == 0)
                  continue;
                for (size_t k = 0; k < 4; ++k)
                  taps.push_back({s.offset[k] * channels, static_cast<float>(s.weight[k])});
              }
            float* a = acc.data() + (ph * settings_.out_w + pw) * channels;
            gather_bin(image, taps.data(), static_cast<int64_t>(taps.size()), channels,
                       settings_.max_mode, a);
            if (taps.empty()) std::fill(a, a + channels, 0.f);  // no samples: 0, as the reference
            if (!settings_.max_mode) {
              const auto scale = static_cast<float>(1.0 / geometry.count);
              for (int64_t c = 0; c < channels; ++c) a[c] *= scale;
            }
          }
        // [bins][C] -> the output's [C][bins].
        float* dst = y + r * channels * bins;
        for (int64_t c = 0; c < channels; ++c)
          for (int64_t b = 0; b < bins; ++b) dst[c * bins + b] = acc[b * channels + c];
      }
    });
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw ExecutionError("RoiAlign node '" + node_.name + "': " + message);
  }

  Node node_;
  RoiAlignSettings settings_;
  Tensor nhwc_;  // the channels-last maps of the current run
};

}  // namespace

void register_roi_align(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "RoiAlign", construct_kernel<RoiAlignKernel>);
}

}  // namespace troupe::kernels::onednn
