// Split of a 4-D f32 tensor (bf16 between bf16 kernels) along the channels, the inverse of the
// channel join (concat.cpp), as copies of contiguous runs: a pixel's channels of one part in
// channels-last, a part's whole image in plain or channel-blocked tensors ([N][C/b][H][W][b],
// when every part fills whole blocks). It reads and writes the model's activation layout, so the
// convolutions around it keep theirs: the strided-copy Split takes plain tensors only, and a
// split between convolutions (MixNet's mixed depthwise kernels, Res2Net's scales, a CSP block's
// halves) sent its input to plain and its parts to depthwise convolutions reading plain tensors
// (oneDNN's brdgmm_dw then ran MixNet's first one at 5.5 GFLOP/s). A part the memory plan keeps
// inside the input (one run of it) is not copied.
#include <cstring>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/strided_copy.hpp"

namespace troupe::kernels::onednn {

namespace {

class ChannelSplitKernel final : public DnnlKernel {
 public:
  explicit ChannelSplitKernel(const KernelRequest& request) : DnnlKernel(request) {
    if (request.inputs.empty() || request.outputs.empty()) throw Unsupported{};
    const Shape& in = request.inputs[0].shape;
    int64_t axis = request.node.attributes.get_int_or("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(in.rank());
    if (in.rank() != 4 || axis != 1 || !in.is_static()) throw Unsupported{};
    // An empty part would make DnnlKernel::execute return before the others are written.
    for (const ValueInfo& out : request.outputs)
      if (out.type != ElementType::f32 || !out.shape.is_static() || out.shape.element_count() == 0)
        throw Unsupported{};
  }

  TensorLayout preferred_input_layout(size_t i) const override {
    return i == 0 ? stored_layout(activation_layout()) : TensorLayout{};
  }
  TensorLayout preferred_output_layout(size_t /*o*/) const override {
    return stored_layout(activation_layout());
  }
  bool stores_one_type() const override { return true; }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const TensorLayout layout = input_layout(0);
    const size_t element_bytes = layout.bf16 ? 2 : sizeof(float);
    const Shape& in = inputs[0];
    int64_t channels = 0;
    row_bytes_.clear();
    for (size_t o = 0; o < outputs.size(); ++o) {
      const Shape& part = outputs[o];
      if (output_layout(o) != layout || part.rank() != 4 || part[0] != in[0] || part[2] != in[2] ||
          part[3] != in[3])
        return false;
      // A blocked part whose channels end inside a block would share it with the next one.
      if (layout.channel_block > 0 && part[1] % layout.channel_block != 0) return false;
      channels += part[1];
      const int64_t run = layout.channels_last ? part[1] : part[1] * part[2] * part[3];
      row_bytes_.push_back(static_cast<size_t>(run) * element_bytes);
    }
    if (channels != in[1]) return false;
    outer_ = layout.channels_last ? in[0] * in[2] * in[3] : in[0];
    set_impl(layout.bf16 ? "split_rows/bf16" : "split_rows");
    return true;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    const auto* in = static_cast<const uint8_t*>(inputs[0].raw_data());
    for (int64_t o = 0; o < outer_; ++o)
      for (size_t k = 0; k < outputs.size(); ++k) {
        if (row_bytes_[k] == 0) continue;
        auto* out =
            static_cast<uint8_t*>(outputs[k].raw_data()) + static_cast<size_t>(o) * row_bytes_[k];
        if (out != in) std::memcpy(out, in, row_bytes_[k]);
        in += row_bytes_[k];
      }
  }

 private:
  int64_t outer_ = 1;
  std::vector<size_t> row_bytes_;  // per part: one contiguous run per outer index
};

}  // namespace

std::unique_ptr<Kernel> make_channel_split(const KernelRequest& request) {
  return make_kernel_for_data<ChannelSplitKernel>(request);
}

}  // namespace troupe::kernels::onednn
