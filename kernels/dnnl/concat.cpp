// Concat of f32 tensors (bf16 between bf16 kernels) as copies of contiguous runs, one per input per
// outer index. A 4-D join along the channels (the branch joins of GoogLeNet/Inception, SqueezeNet's
// fire modules, DenseNet) may read and write the model's activation layout, so that the
// convolutions around it keep theirs instead of every join reordering its inputs to plain and its
// output back: in channels-last a run is a pixel's channels of one input, channel-blocked
// ([N][C/b][H][W][b]) it is an input's whole image when its channels fill whole blocks, as the
// graph compiler lays them out. Measured against oneDNN 2.6's concat primitive (simple:any) on Zen
// 5: 3x as fast on DenseNet's blocked joins, DenseNet 8-11% faster with channels-last joins,
// GoogLeNet, SqueezeNet and Inception-v3 unchanged. Inputs in another layout than the output are
// declined (the graph compiler then keeps the node plain): oneDNN's concat converted them element
// by element, ShuffleNetV2's joins (blocked in, plain out for its channel shuffle) took 14x as
// long. Plain joins of other element types (int64 indices and coordinates in detection and
// point-cloud graphs, masks) are the same byte runs: a pillar net's [64, 2400, 1] x 2 int64
// coordinates took 1.06 ms on the reference's element-wise copy.
#include <cstring>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"

namespace troupe::kernels::onednn {

namespace {

class ConcatKernel final : public DnnlKernel {
 public:
  explicit ConcatKernel(const KernelRequest& request) : DnnlKernel(request) {
    if (request.inputs.empty() || present_outputs(request) != 1) throw Unsupported{};
    for (size_t i = 0; i < request.inputs.size(); ++i)
      if (!has_input(i)) throw Unsupported{};
    const Shape& out = request.outputs[0].shape;
    const int64_t rank = static_cast<int64_t>(out.rank());
    int64_t axis = request.node.attributes.get_int_or("axis", 0);
    if (axis < 0) axis += rank;
    if (rank == 0 || axis < 0 || axis >= rank) throw Unsupported{};
    axis_ = static_cast<int>(axis);
    element_bytes_ = element_size(request.outputs[0].type);
    lays_out_ = (rank == 4 || rank == 5) && axis_ == 1 && out.is_static() &&
                request.outputs[0].type == ElementType::f32;
  }

  // In a bf16 graph it joins bf16 activations where every input and the output are stored so
  // (the graph compiler stores them alike: stores_one_type).
  TensorLayout preferred_input_layout(size_t /*i*/) const override {
    return lays_out_ ? stored_layout(activation_layout()) : TensorLayout{};
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    return lays_out_ && o == 0 ? stored_layout(activation_layout()) : TensorLayout{};
  }
  bool stores_one_type() const override { return true; }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const Dims dst = to_dims(outputs[0]);
    const TensorLayout layout = output_layout(0);
    const size_t element_bytes = layout.bf16 ? 2 : element_bytes_;
    present_.clear();
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (input_layout(i) != layout || inputs[i].rank() != dst.size()) return false;
      if (inputs[i].element_count() == 0) continue;  // ONNX allows empty inputs
      // A blocked input whose channels end inside a block would interleave with the next one's.
      if (layout.channel_block > 0 && inputs[i][1] % layout.channel_block != 0) return false;
      present_.push_back(i);
    }
    if (present_.empty()) return false;
    const size_t axis = static_cast<size_t>(axis_);
    outer_ = 1;
    row_bytes_.clear();
    if (layout.channels_last) {  // joined along the channels (lays_out_): a run per pixel
      for (size_t d = 0; d < dst.size(); ++d)
        if (d != 1) outer_ *= dst[d];
      for (size_t i : present_)
        row_bytes_.push_back(static_cast<size_t>(inputs[i][1]) * element_bytes);
    } else {  // plain, or [N][C/b][H][W][b] (the same runs as plain, per image)
      for (size_t d = 0; d < axis; ++d) outer_ *= dst[d];
      for (size_t i : present_) {
        int64_t row = 1;
        for (size_t d = axis; d < dst.size(); ++d) row *= inputs[i][d];
        row_bytes_.push_back(static_cast<size_t>(row) * element_bytes);
      }
    }
    set_impl(layout.bf16 ? "concat_rows/bf16" : "concat_rows");
    return true;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    auto* out = static_cast<uint8_t*>(outputs[0].raw_data());
    for (int64_t o = 0; o < outer_; ++o)
      for (size_t k = 0; k < present_.size(); ++k) {
        const auto* in = static_cast<const uint8_t*>(inputs[present_[k]].raw_data()) +
                         static_cast<size_t>(o) * row_bytes_[k];
        // An input the memory plan placed in its slice of the output is there already.
        if (in != out) std::memcpy(out, in, row_bytes_[k]);
        out += row_bytes_[k];
      }
  }

 private:
  int axis_ = 0;
  size_t element_bytes_ = sizeof(float);
  bool lays_out_ = false;
  std::vector<size_t> present_;  // the inputs with elements, in order
  int64_t outer_ = 1;
  std::vector<size_t> row_bytes_;  // per present input: one contiguous run per outer index
};

// f32 joins in any layout; those of another numeric type plain, all inputs of the output's type.
std::unique_ptr<Kernel> make_concat(const KernelRequest& request) {
  if (all_f32(request)) return create_kernel<ConcatKernel>(request);
  if (request.outputs.empty()) return nullptr;
  const ElementType type = request.outputs[0].type;
  if (type == ElementType::string || element_size(type) == 0 ||
      !request.output_layout(0).is_plain())
    return nullptr;
  for (size_t i = 0; i < request.inputs.size(); ++i)
    if (request.inputs[i].type != type || !request.input_layout(i).is_plain()) return nullptr;
  return create_kernel<ConcatKernel>(request);
}

}  // namespace

void register_concat(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "Concat", make_concat);
}

}  // namespace troupe::kernels::onednn
