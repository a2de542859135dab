// Concat of f32 tensors. A 4-D concatenation along the channels (the branch joins of GoogLeNet/
// Inception, SqueezeNet's fire modules, DenseNet) may read and write the model's activation
// layout, so that the convolutions around it keep theirs instead of every join reordering its
// inputs to plain and its output back; it then runs on oneDNN's concat primitive. Plain tensors
// are copied row by row. Inputs in another layout than the output are declined (the graph
// compiler then keeps the node plain): oneDNN 2.6's concat converted them element by element,
// ShuffleNetV2's joins (blocked in, plain out for its channel shuffle) took 14x as long.
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
    lays_out_ = rank == 4 && axis_ == 1 && out.is_static();
  }

  TensorLayout preferred_input_layout(size_t /*i*/) const override {
    return lays_out_ ? activation_layout() : TensorLayout{};
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    return lays_out_ && o == 0 ? activation_layout() : TensorLayout{};
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const Dims dst = to_dims(outputs[0]);
    const TensorLayout layout = output_layout(0);
    std::vector<dnnl::memory::desc> sources;
    present_.clear();
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (input_layout(i) != layout) return false;
      const Dims src = to_dims(inputs[i]);
      if (src.size() != dst.size()) return false;
      if (inputs[i].element_count() == 0) continue;  // ONNX allows empty inputs
      sources.push_back(tensor_desc(src, layout));
      present_.push_back(i);
    }
    if (sources.empty()) return false;
    rows_ = layout.is_plain();
    if (rows_) {
      // Rows of the inputs' trailing axes from the concatenated one, one per outer index.
      outer_ = 1;
      for (int d = 0; d < axis_; ++d) outer_ *= dst[static_cast<size_t>(d)];
      row_bytes_.clear();
      for (size_t i : present_) {
        int64_t row = 1;
        for (size_t d = static_cast<size_t>(axis_); d < dst.size(); ++d) row *= inputs[i][d];
        row_bytes_.push_back(static_cast<size_t>(row) * sizeof(float));
      }
      set_impl("concat_rows");
      return true;
    }
    const dnnl::memory::desc dst_md = tensor_desc(dst, layout);
    dnnl::concat::primitive_desc pd(dst_md, axis_, sources, cpu_engine(), primitive_attributes());
    primitive_ = Primitive::of<dnnl::concat>(pd);
    sources_.clear();
    for (const dnnl::memory::desc& md : sources) sources_.push_back(unbound_memory(md));
    dst_ = unbound_memory(dst_md);
    set_impl(pd);
    return true;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    if (rows_) {
      auto* out = static_cast<uint8_t*>(outputs[0].raw_data());
      for (int64_t o = 0; o < outer_; ++o)
        for (size_t k = 0; k < present_.size(); ++k) {
          const auto* in = static_cast<const uint8_t*>(inputs[present_[k]].raw_data());
          std::memcpy(out, in + static_cast<size_t>(o) * row_bytes_[k], row_bytes_[k]);
          out += row_bytes_[k];
        }
      return;
    }
    std::unordered_map<int, dnnl::memory> args;
    for (size_t k = 0; k < present_.size(); ++k) {
      bind(sources_[k], inputs[present_[k]]);
      args.emplace(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(k), sources_[k]);
    }
    bind(dst_, outputs[0]);
    args.emplace(DNNL_ARG_DST, dst_);
    primitive_.execute(stream_, args);
  }

 private:
  int axis_ = 0;
  bool lays_out_ = false;
  std::vector<size_t> present_;  // the inputs with elements, in order
  bool rows_ = false;            // plain: copied row by row, no primitive
  int64_t outer_ = 1;
  std::vector<size_t> row_bytes_;  // per present input
  Primitive primitive_;
  std::vector<dnnl::memory> sources_;
  dnnl::memory dst_;
};

}  // namespace

void register_concat(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "Concat", make_kernel<ConcatKernel>);
}

}  // namespace troupe::kernels::onednn
