// QLinearLookup on u8/i8 tensors in any layout its neighbours keep (channels-last between the
// int8 convolutions): one table read per element, so the float ops it stands for (Hardswish,
// Sigmoid, Clip, ... between a DequantizeLinear and a QuantizeLinear) cost no conversion passes.
#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/quantization_params.hpp"
#include "kernels/layout_conversion.hpp"

namespace troupe::kernels::onednn {

namespace {

class QuantizedLookupKernel final : public Kernel {
 public:
  explicit QuantizedLookupKernel(const KernelRequest& request) {
    const auto& in = request.inputs;
    if (in.size() != 2 || request.outputs.size() != 1 || !is_8bit(in[0].type) ||
        !is_8bit(in[1].type) || in[1].type != request.outputs[0].type ||
        request.constant_inputs.size() != 2 || request.constant_inputs[1] == nullptr ||
        request.constant_inputs[1]->size() != 256)
      throw Unsupported{};
    // Index by the input's bit pattern: i8 values -128..127 are table entries 0..255.
    const auto* entries = static_cast<const uint8_t*>(request.constant_inputs[1]->raw_data());
    const bool signed_input = in[0].type == ElementType::i8;
    for (int bits = 0; bits < 256; ++bits)
      table_[static_cast<size_t>(bits)] = entries[signed_input ? (bits + 128) & 0xff : bits];
    rank_ = in[0].shape.rank();
    x_layout_ = request.input_layout(0);
    y_layout_ = request.output_layout(0);
  }

  std::string implementation() const override { return "dnnl:lookup"; }

  TensorLayout preferred_input_layout(size_t i) const override {
    return i == 0 && rank_ == 4 ? TensorLayout::channels_last_order() : TensorLayout{};
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    return o == 0 && rank_ == 4 ? TensorLayout::channels_last_order() : TensorLayout{};
  }

  void execute(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    const Tensor& x = in_layout(inputs[0], x_layout_, y_layout_, x_scratch_);
    Tensor& y = outputs[0];
    if (x.size() != y.size())
      throw ExecutionError("QLinearLookup: an input of " + std::to_string(x.size()) +
                           " elements for an output of " + std::to_string(y.size()));
    const auto* in = static_cast<const uint8_t*>(x.raw_data());
    auto* out = static_cast<uint8_t*>(y.raw_data());
    const int64_t n = y.size();
    for (int64_t i = 0; i < n; ++i) out[i] = table_[in[i]];
  }

 private:
  std::array<uint8_t, 256> table_{};
  size_t rank_ = 0;
  TensorLayout x_layout_, y_layout_;
  Tensor x_scratch_;
};

}  // namespace

void register_quantized_lookup(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "QLinearLookup",
               construct_kernel<QuantizedLookupKernel>);
}

}  // namespace troupe::kernels::onednn
