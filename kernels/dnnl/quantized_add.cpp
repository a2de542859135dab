// QLinearAdd of two same-shape u8/i8 tensors with a Relu or no activation, as one pass of f32
// arithmetic: exactly the steps of the DequantizeLinear/Add/Relu/QuantizeLinear chain it stands
// for (engine/ops/quantized_post_ops.hpp), so it matches the reference bit for bit. oneDNN 2.6's
// binary primitive takes scales but no zero points, so this one is a plain loop the compiler
// vectorizes; the tensors may be channels-last like the int8 convolutions around them (the
// operation is element-wise: any layout, as long as all three agree).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/ops/quantized_post_ops.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/quantization_params.hpp"
#include "kernels/layout_conversion.hpp"

namespace troupe::kernels::onednn {

namespace {

class QuantizedAddKernel final : public Kernel {
 public:
  explicit QuantizedAddKernel(const KernelRequest& request) {
    const auto& in = request.inputs;
    if (in.size() != 8 || request.outputs.size() != 1 || !is_8bit(in[0].type) ||
        !is_8bit(in[3].type) || !is_8bit(request.outputs[0].type))
      throw Unsupported{};
    if (!in[0].shape.is_static() || in[0].shape != in[3].shape ||
        in[0].shape != request.outputs[0].shape)
      throw Unsupported{};
    const std::string activation = fused::activation(request.node);
    if (!activation.empty() && activation != "Relu") throw Unsupported{};
    relu_ = activation == "Relu";
    const auto& c = request.constant_inputs;
    if (c.size() != 8) throw Unsupported{};
    a_scale_ = static_cast<float>(constant_scalar(c[1]));
    a_zero_ = static_cast<int32_t>(constant_scalar(c[2]));
    b_scale_ = static_cast<float>(constant_scalar(c[4]));
    b_zero_ = static_cast<int32_t>(constant_scalar(c[5]));
    c_scale_ = static_cast<float>(constant_scalar(c[6]));
    c_zero_ = static_cast<float>(constant_scalar(c[7]));
    a_type_ = in[0].type;
    b_type_ = in[3].type;
    c_type_ = request.outputs[0].type;
    rank_ = in[0].shape.rank();
    a_layout_ = request.input_layout(0);
    b_layout_ = request.input_layout(3);
    c_layout_ = request.output_layout(0);
  }

  std::string implementation() const override { return "dnnl:loop"; }

  TensorLayout preferred_input_layout(size_t i) const override {
    return (i == 0 || i == 3) && rank_ == 4 ? TensorLayout::channels_last_order() : TensorLayout{};
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    return o == 0 && rank_ == 4 ? TensorLayout::channels_last_order() : TensorLayout{};
  }

  void execute(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    const Tensor& a = in_layout(inputs[0], a_layout_, c_layout_, a_scratch_);
    const Tensor& b = in_layout(inputs[3], b_layout_, c_layout_, b_scratch_);
    Tensor& c = outputs[0];
    const int64_t n = c.size();
    if (a.size() != n || b.size() != n)
      throw ExecutionError("QLinearAdd: operands of " + std::to_string(a.size()) + " and " +
                           std::to_string(b.size()) + " elements for an output of " +
                           std::to_string(n));
    dispatch(a_type_, a.raw_data(), [&](const auto* pa) {
      dispatch(b_type_, b.raw_data(), [&](const auto* pb) {
        if (c_type_ == ElementType::u8)
          add(pa, pb, static_cast<uint8_t*>(c.raw_data()), n, 0.f, 255.f);
        else
          add(pa, pb, static_cast<int8_t*>(c.raw_data()), n, -128.f, 127.f);
      });
    });
  }

 private:
  template <class F>
  static void dispatch(ElementType type, const void* data, F&& f) {
    if (type == ElementType::u8)
      f(static_cast<const uint8_t*>(data));
    else
      f(static_cast<const int8_t*>(data));
  }

  // The chain's f32 steps: DQ of each operand, their sum, Relu, then Q's division, rounding and
  // saturation (clamped before rounding: the same integer, and within round_even's range).
  template <class A, class B, class C>
  void add(const A* a, const B* b, C* c, int64_t n, float low, float high) const {
    const float a_scale = a_scale_, b_scale = b_scale_, c_scale = c_scale_, c_zero = c_zero_;
    const int32_t a_zero = a_zero_, b_zero = b_zero_;
    const bool relu = relu_;
    const float q_low = low - c_zero - 1.f, q_high = high - c_zero + 1.f;
    for (int64_t i = 0; i < n; ++i) {
      const float x = static_cast<float>(static_cast<int32_t>(a[i]) - a_zero) * a_scale;
      const float y = static_cast<float>(static_cast<int32_t>(b[i]) - b_zero) * b_scale;
      float sum = x + y;
      if (relu) sum = sum < 0.f ? 0.f : sum;
      const float q = std::min(std::max(sum / c_scale, q_low), q_high);
      c[i] = static_cast<C>(std::min(std::max(round_even(q) + c_zero, low), high));
    }
  }

  float a_scale_ = 1.f, b_scale_ = 1.f, c_scale_ = 1.f, c_zero_ = 0.f;
  int32_t a_zero_ = 0, b_zero_ = 0;
  bool relu_ = false;
  ElementType a_type_ = ElementType::u8, b_type_ = ElementType::u8, c_type_ = ElementType::u8;
  size_t rank_ = 0;
  TensorLayout a_layout_, b_layout_, c_layout_;
  Tensor a_scratch_, b_scratch_;
};

}  // namespace

void register_quantized_add(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "QLinearAdd", construct_kernel<QuantizedAddKernel>);
}

}  // namespace troupe::kernels::onednn
