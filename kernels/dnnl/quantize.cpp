// QuantizeLinear (f32 -> u8/s8) and DequantizeLinear (u8/s8 -> f32) with constant per-tensor
// parameters as one oneDNN reorder each: the scale is the reorder's output scale, the zero point
// its destination (or source) zero point. A reorder also converts layouts, so the kernels read and
// write channels-last where their neighbours keep int8 activations that way.
//
// The reorder multiplies by 1 / scale where ONNX divides by the scale: the two round the same way
// except within an ulp of a tie, so a quantized value may differ from the reference's by one step
// there.
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/quantization_params.hpp"

namespace troupe::kernels::onednn {

namespace {

class LinearQuantizationKernel final : public DnnlKernel {
 public:
  explicit LinearQuantizationKernel(const KernelRequest& request) : DnnlKernel(request) {
    quantize_ = request.node.op_type == "QuantizeLinear";
    const ElementType in = request.inputs.at(0).type;
    const ElementType out = request.outputs.at(0).type;
    if (quantize_ ? (in != ElementType::f32 || !is_8bit(out))
                  : (!is_8bit(in) || out != ElementType::f32))
      throw Unsupported{};
    const Tensor* scale = constant(1);
    if (scale == nullptr || scale->size() != 1 || !(scale->value_at(0) > 0.0)) throw Unsupported{};
    int32_t zero_point = 0;
    if (has_input(2)) {
      const Tensor* zero = constant(2);
      if (zero == nullptr || zero->size() != 1) throw Unsupported{};
      zero_point = static_cast<int32_t>(zero->value_at(0));
    }
    scale_ = static_cast<float>(quantize_ ? 1.0 / scale->value_at(0) : scale->value_at(0));
    zero_point_ = ZeroPointMemory(zero_point);
    src_type_ = *to_dnnl(in);
    dst_type_ = *to_dnnl(out);
    rank_ = request.inputs[0].shape.rank();
  }

  // The integer side channels-last, as the int8 kernels keep it; the float side in the layout
  // the float convolutions keep activations in (a layer left in float form reads its
  // dequantized input and writes the value to quantize that way): the one reorder converts both.
  TensorLayout preferred_input_layout(size_t i) const override {
    if (i != 0 || rank_ != 4) return {};
    return quantize_ ? activation_layout() : TensorLayout::channels_last_order();
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    if (o != 0 || rank_ != 4) return {};
    return quantize_ ? TensorLayout::channels_last_order() : activation_layout();
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const Dims dims = to_dims(inputs[0]);
    if (to_dims(outputs[0]) != dims) return false;
    const bool layout_capable = dims.size() >= 3 && dims.size() <= 5;
    if ((!input_layout(0).is_plain() || !output_layout(0).is_plain()) && !layout_capable)
      return false;
    const dnnl::memory::desc src_md = layout_capable ? tensor_desc(dims, input_layout(0), src_type_)
                                                     : plain_desc(dims, src_type_);
    const dnnl::memory::desc dst_md = layout_capable
                                          ? tensor_desc(dims, output_layout(0), dst_type_)
                                          : plain_desc(dims, dst_type_);
    dnnl::primitive_attr attr = primitive_attributes();
    attr.set_output_scales(0, {scale_});
    attr.set_zero_points(quantize_ ? DNNL_ARG_DST : DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    dnnl::reorder::primitive_desc pd(cpu_engine(), src_md, cpu_engine(), dst_md, attr);
    primitive_ = Primitive::of<dnnl::reorder>(pd);
    src_ = unbound_memory(src_md);
    dst_ = unbound_memory(dst_md);
    set_impl(pd);
    return true;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    bind(src_, inputs[0]);
    bind(dst_, outputs[0]);
    primitive_.execute(stream_,
                       {{DNNL_ARG_FROM, src_},
                        {DNNL_ARG_TO, dst_},
                        {DNNL_ARG_ATTR_ZERO_POINTS | (quantize_ ? DNNL_ARG_DST : DNNL_ARG_SRC),
                         zero_point_.memory()}});
  }

 private:
  bool quantize_ = true;
  float scale_ = 1.f;
  size_t rank_ = 0;
  ZeroPointMemory zero_point_;
  dnnl::memory::data_type src_type_ = dnnl::memory::data_type::f32;
  dnnl::memory::data_type dst_type_ = dnnl::memory::data_type::u8;
  Primitive primitive_;
  dnnl::memory src_;
  dnnl::memory dst_;
};

}  // namespace

void register_linear_quantization(KernelRegistry& registry) {
  for (const char* op : {"QuantizeLinear", "DequantizeLinear"})
    registry.add(backend_name, backend_priority, op, create_kernel<LinearQuantizationKernel>);
}

}  // namespace troupe::kernels::onednn
