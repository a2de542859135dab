// Resize on oneDNN's resampling primitive, for what it computes exactly as ONNX does: linear
// interpolation of the spatial axes (N and C unchanged) with half-pixel coordinates, which is
// ONNX's half_pixel, and pytorch_half_pixel wherever an output axis is longer than 1 (what torch
// exports for bilinear upsampling without align_corners), with sizes or with scales whose product
// is exact (oneDNN samples at output / input size). Nearest mode runs as row copies
// (nearest_resize.cpp), other linear and cubic ones as separable row sums
// (interpolating_resize.cpp); tf_crop_and_resize's extrapolation on the reference kernel.
#include "engine/ops/resize.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/interpolating_resize.hpp"
#include "kernels/dnnl/nearest_resize.hpp"

namespace troupe::kernels::onednn {

namespace {

class ResizeKernel final : public SrcDstKernel {
 public:
  explicit ResizeKernel(const KernelRequest& request)
      : SrcDstKernel(request), attributes_(resize::read_attributes(request.node)) {
    if (present_outputs(request) != 1 || attributes_.mode != resize::Mode::linear)
      throw Unsupported{};
    if (attributes_.coordinate_mode != resize::CoordinateMode::half_pixel &&
        attributes_.coordinate_mode != resize::CoordinateMode::pytorch_half_pixel)
      throw Unsupported{};
    // The scales must be known now to be oneDNN's factors; sizes only fix the output shape.
    if (request.inputs.size() > 2 && request.inputs[2].type != ElementType::undefined &&
        request.inputs[2].shape.element_count() != 0) {
      const Tensor* scales = constant(2);
      if (scales == nullptr) throw Unsupported{};
      for (int64_t i = 0; i < scales->size(); ++i) scales_.push_back(scales->value_at(i));
    }
    // Between convolutions (a U-Net's or a segmentation head's upsampling) the activation layout,
    // which oneDNN's resampling reads as it is: in plain tensors only, its input and output went
    // through reorders (a U-Net's last upsampling of 32 channels to 132x180: 0.84 ms).
    lay_out_first_operand(request);
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const Shape& x = inputs[0];
    const Shape& y = outputs[0];
    const size_t rank = x.rank();
    if (rank < 3 || rank > 5 || y.rank() != rank || x[0] != y[0] || x[1] != y[1]) return false;
    if (!scales_.empty() && (scales_.size() != rank || scales_[0] != 1.0 || scales_[1] != 1.0))
      return false;
    std::vector<float> factors;
    for (size_t a = 2; a < rank; ++a) {
      // pytorch_half_pixel samples index 0 for an output axis of length 1; half_pixel does not.
      if (attributes_.coordinate_mode == resize::CoordinateMode::pytorch_half_pixel && y[a] == 1)
        return false;
      // oneDNN samples at output / input; a given scale whose product was rounded down samples
      // elsewhere in ONNX, so only exact ones run here.
      if (!scales_.empty() && static_cast<double>(x[a]) * scales_[a] != static_cast<double>(y[a]))
        return false;
      factors.push_back(static_cast<float>(static_cast<double>(y[a]) / static_cast<double>(x[a])));
    }
    if (input_layout(0).bf16 || output_layout(0).bf16) return false;
    // Computed in the input's layout; an output assigned another one is reordered into it.
    const dnnl::memory::desc src = tensor_desc(to_dims(x), input_layout(0));
    const dnnl::memory::desc dst = tensor_desc(to_dims(y), output_layout(0));
    dnnl::resampling_forward::desc desc(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::resampling_linear, factors, src,
                                        tensor_desc(to_dims(y), input_layout(0)));
    dnnl::resampling_forward::primitive_desc pd(desc, primitive_attributes(), cpu_engine());
    if (is_reference(pd) && !input_layout(0).is_plain()) return false;
    return adopt<dnnl::resampling_forward>(pd, src, dst);
  }

 private:
  resize::Attributes attributes_;
  std::vector<double> scales_;  // per axis, when given as a constant
};

}  // namespace

void register_resize(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "Resize", [](const KernelRequest& request) {
    if (auto nearest = make_nearest_resize(request)) return nearest;
    if (auto linear = make_kernel_for_data<ResizeKernel>(request)) return linear;
    return make_interpolating_resize(request);
  });
}

}  // namespace troupe::kernels::onednn
