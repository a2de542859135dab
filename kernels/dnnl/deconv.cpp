// ConvTranspose (1-D to 3-D, groups, dilations, asymmetric pads, output_padding, output_shape,
// auto_pad, optional bias) on oneDNN's deconvolution primitive, which computes it as the
// backward-data pass of the matching convolution with oneDNN's JIT kernels. Like Conv, it reads
// and writes the activation layout the graph compiler keeps between kernels; weights are packed
// once. A 2-D one with few output channels (an image decoder's last layer, 64 -> 3) runs as a
// product and its scatter instead (below).
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "engine/ops/fused_post_ops.hpp"
#include "engine/ops/spatial.hpp"
#include "kernels/dnnl/conv_geometry.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"

namespace troupe::kernels::onednn {

namespace {

// ONNX ConvTranspose weights [C_in, M/group, k...] as oneDNN's deconvolution weights: logical
// {OC, IC, k...}, or {G, OC/G, IC/G, k...} grouped, over the same dense memory (in ONNX's order
// the input channel comes before the output channel, so the strides say so).
dnnl::memory::desc onnx_deconv_weights(const Dims& onnx, int64_t group) {
  const Dims kernel(onnx.begin() + 2, onnx.end());
  int64_t kernel_size = 1;
  for (int64_t k : kernel) kernel_size *= k;
  const int64_t group_out = onnx[1];
  const int64_t group_in = onnx[0] / group;
  Dims dims = {group_out, group_in};  // OC/G, IC/G
  Dims strides = {kernel_size, group_out * kernel_size};
  if (group > 1) {
    dims.insert(dims.begin(), group);
    strides.insert(strides.begin(), group_in * group_out * kernel_size);
  } else {
    dims[0] = group_out;  // OC
  }
  int64_t inner = kernel_size;
  for (int64_t k : kernel) {
    inner /= k;
    dims.push_back(k);
    strides.push_back(inner);
  }
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

// Output channels up to which a 2-D ConvTranspose runs as columns: oneDNN's deconvolution
// vectorises along them, and with fewer than a vector's 16 its kernels ran 18-28 GMAC/s on one
// Zen 4 core, where 32 channels in the blocked layout ran 78-92. 4x4 kernel, stride 2, 128 x 128
// input of 64 channels, one thread, columns against oneDNN: 3 output channels 0.87 vs 2.77 ms, 8
// channels 2.49 vs 3.54, 15 channels 4.81 vs 4.46 (the scatter grows with them); 32 -> 1 channel
// 0.15 vs 1.41 ms.
constexpr int64_t max_column_out_channels = 8;

// ConvTranspose as X^T W: each input pixel's row of C_in values times the weights [C_in, C_out *
// kh * kw] (ONNX's layout as it is) gives the pixel's contribution to every tap of every output
// channel, which is then added at its place in the output (col2im). On plain [N, C, H, W]
// tensors, one sgemm per image: columns [C_out * kh * kw, H * W] = W^T X.
class DeconvColumns {
 public:
  void prepare(const Dims& src, const Dims& weights, const Dims& dst, const Dims& strides,
               const Dims& pad_l) {
    src_ = src;
    weights_ = weights;
    dst_ = dst;
    strides_ = strides;
    pad_l_ = pad_l;
    columns_.resize(static_cast<size_t>(weights[1] * weights[2] * weights[3] * src[2] * src[3]));
  }

  void run(const float* x, const float* w, const float* bias, float* y) {
    const int64_t in_channels = src_[1], in_h = src_[2], in_w = src_[3];
    const int64_t out_channels = weights_[1], kh = weights_[2], kw = weights_[3];
    const int64_t out_h = dst_[2], out_w = dst_[3];
    const int64_t pixels = in_h * in_w, rows = out_channels * kh * kw;
    for (int64_t n = 0; n < src_[0]; ++n) {
      const float* image = x + n * in_channels * pixels;
      float* out = y + n * out_channels * out_h * out_w;
      if (dnnl_sgemm('T', 'N', rows, pixels, in_channels, 1.0f, w, rows, image, pixels, 0.0f,
                     columns_.data(), pixels) != dnnl_success)
        throw std::runtime_error("dnnl_sgemm failed");
        // Each output channel's plane is written by one thread: taps of different channels never
        // meet.
#pragma omp parallel for schedule(static) if (out_channels > 1 && omp_get_max_threads() > 1)
      for (int64_t co = 0; co < out_channels; ++co) {
        float* plane = out + co * out_h * out_w;
        std::fill(plane, plane + out_h * out_w, bias ? bias[co] : 0.0f);
        for (int64_t th = 0; th < kh; ++th)
          for (int64_t tw = 0; tw < kw; ++tw) {
            const float* column = columns_.data() + ((co * kh + th) * kw + tw) * pixels;
            // The input columns whose output column of this tap lies inside the output.
            const int64_t first_iw = first_input(tw, pad_l_[1], strides_[1]);
            const int64_t last_iw =
                std::min(in_w - 1, floor_div(out_w - 1 - tw + pad_l_[1], strides_[1]));
            for (int64_t ih = 0; ih < in_h; ++ih) {
              const int64_t oh = ih * strides_[0] + th - pad_l_[0];
              if (oh < 0 || oh >= out_h) continue;
              float* out_row = plane + oh * out_w;
              const float* in_row = column + ih * in_w;
              for (int64_t iw = first_iw; iw <= last_iw; ++iw)
                out_row[iw * strides_[1] + tw - pad_l_[1]] += in_row[iw];
            }
          }
      }
    }
  }

 private:
  static int64_t floor_div(int64_t a, int64_t b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
  }
  // The first input position whose output (i * stride + tap - pad) is not negative.
  static int64_t first_input(int64_t tap, int64_t pad, int64_t stride) {
    return std::max<int64_t>(0, -floor_div(tap - pad, stride));
  }

  Dims src_, weights_, dst_, strides_, pad_l_;
  std::vector<float> columns_;
};

class DeconvKernel final : public DnnlKernel {
 public:
  explicit DeconvKernel(const KernelRequest& request) : DnnlKernel(request) {
    group_ = request.node.attributes.get_int_or("group", 1);
    if (group_ < 1 || request.inputs.size() < 2 || !has_input(1) || present_outputs(request) != 1)
      throw Unsupported{};
    window_ = convolution_window(request);
    rank_ = request.inputs[0].shape.rank();
    const Shape& weights = request.inputs[1].shape;
    columns_ = rank_ == 4 && group_ == 1 && weights.is_static() &&
               weights[1] <= max_column_out_channels &&
               compute_type() == dnnl::memory::data_type::f32 && !fused::is_fused(node_) &&
               std::all_of(window_.dilations.begin(), window_.dilations.end(),
                           [](int64_t d) { return d == 1; }) &&
               deconv_columns_allowed();
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const Dims src = to_dims(inputs[0]);
    const Dims weights = to_dims(inputs[1]);
    const Dims dst = to_dims(outputs[0]);
    if (src.size() != rank_ || weights.size() != rank_ || dst.size() != rank_) return false;
    const int64_t out_channels = weights[1] * group_;
    if (src[1] != weights[0] || weights[0] % group_ != 0 || dst[1] != out_channels) return false;
    spatial::Window window = window_;
    window.kernel.assign(weights.begin() + 2, weights.end());
    const spatial::Geometry g =
        spatial::transposed_geometry(node_, window, spatial::spatial_dims(inputs[0]));
    const size_t n = rank_ - 2;
    Dims strides(n), dilation(n), pad_l(n), pad_r(n);
    for (size_t i = 0; i < n; ++i) {
      if (g.output[i] != dst[2 + i]) return false;
      strides[i] = window.strides[i];
      dilation[i] = window.dilations[i] - 1;  // oneDNN counts dilation from 0
      pad_l[i] = g.pads_begin[i];
      // The end padding that gives exactly this output (output_padding and output_shape included):
      // oneDNN's dst = (src - 1) * stride + extent - pad_l - pad_r.
      const int64_t extent = spatial::dilated_extent(window.kernel[i], window.dilations[i]);
      pad_r[i] = (src[2 + i] - 1) * strides[i] + extent - dst[2 + i] - pad_l[i];
    }
    if (has_input(2) && inputs[2].element_count() != out_channels) return false;
    // The columns read and write plain tensors: a laid-out one assigned anyway (its neighbours
    // chose) goes to oneDNN.
    columns_active_ = columns_ && input_layout(0).is_plain() && output_layout(0).is_plain();
    if (columns_active_) {
      columns_kernel_.prepare(src, weights, dst, strides, pad_l);
      set_impl("deconv_columns");
      return true;
    }
    const dnnl::memory::desc bias_md = plain_f32({out_channels});
    const dnnl::memory::desc weights_md = onnx_deconv_weights(weights, group_);
    const dnnl::memory::desc src_md = tensor_desc(src, input_layout(0));
    const dnnl::memory::desc dst_md = tensor_desc(dst, output_layout(0));

    auto make = [&](bool assigned_layouts) {
      return create_in(compute_type(), [&](dnnl::memory::data_type type) {
        auto any = [](const Dims& dims, dnnl::memory::data_type t) {
          return dnnl::memory::desc(dims, t, dnnl::memory::format_tag::any);
        };
        // A laid-out tensor is read and written in its layout (src converted to the computing
        // type by the src reorder); a plain one lets the primitive choose. dst is always f32.
        const TensorLayout src_order = assigned_layouts ? input_layout(0).order() : TensorLayout{};
        const TensorLayout dst_order = assigned_layouts ? output_layout(0).order() : TensorLayout{};
        const auto f32 = dnnl::memory::data_type::f32;
        const dnnl::memory::desc src_choice =
            src_order.is_plain() ? any(src, type) : tensor_desc(src, src_order, type);
        const dnnl::memory::desc dst_choice =
            dst_order.is_plain() ? any(dst, f32) : tensor_desc(dst, dst_order, f32);
        const dnnl::memory::desc weights_choice = any(weights_md.dims(), type);
        const auto kind = dnnl::prop_kind::forward_inference;
        const auto algorithm = dnnl::algorithm::deconvolution_direct;
        const dnnl::deconvolution_forward::desc desc =
            has_input(2)
                ? dnnl::deconvolution_forward::desc(kind, algorithm, src_choice, weights_choice,
                                                    bias_md, dst_choice, strides, dilation, pad_l,
                                                    pad_r)
                : dnnl::deconvolution_forward::desc(kind, algorithm, src_choice, weights_choice,
                                                    dst_choice, strides, dilation, pad_l, pad_r);
        return dnnl::deconvolution_forward::primitive_desc(desc, primitive_attributes(),
                                                           cpu_engine());
      });
    };
    // As for Conv: where oneDNN answers the assigned layouts with its reference kernel, let it
    // choose the layouts and reorder around the primitive instead.
    const bool laid_out = !input_layout(0).order().is_plain() || !output_layout(0).is_plain();
    dnnl::deconvolution_forward::primitive_desc pd = make(true);
    if (laid_out) pd = unless_reference(pd, [&] { return make(false); });
    primitive_ = Primitive::of<dnnl::deconvolution_forward>(pd);
    bf16_src_ = pd.src_desc().data_type() == dnnl::memory::data_type::bf16;
    src_ = LayoutBridge(src_md, pd.src_desc(), 0);
    dst_ = LayoutBridge(dst_md, pd.dst_desc(), 1);
    weights_ = PackedWeights(weights_md, pd.weights_desc(), constant(1), stream_);
    bias_ = unbound_memory(bias_md);
    set_impl(pd);
    return true;
  }

  const PackedWeights* packed_weights(size_t i) const override {
    return i == 1 && !columns_active_ ? &weights_ : nullptr;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    if (columns_active_) {
      columns_kernel_.run(inputs[0].data<float>(), inputs[1].data<float>(),
                          has_input(2) ? inputs[2].data<float>() : nullptr,
                          outputs[0].data<float>());
      return;
    }
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, src_.to_internal(inputs[0], stream_)},
        {DNNL_ARG_WEIGHTS, weights_.get(inputs[1], stream_)},
        {DNNL_ARG_DST, dst_.output_memory(outputs[0])}};
    if (has_input(2)) {
      bind(bias_, inputs[2]);
      args[DNNL_ARG_BIAS] = bias_;
    }
    primitive_.execute(stream_, args);
    dst_.from_internal(outputs[0], stream_);
  }

 public:
  // Between convolutions (a U-Net's decoder) it keeps their activation layout, so neither side
  // reorders; it reads bf16 where it computes in bf16, and writes f32.
  TensorLayout preferred_input_layout(size_t i) const override {
    if (i != 0 || !laid_out_rank() || columns_) return {};
    return bf16_src_ ? activation_layout().in_bf16() : activation_layout();
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    return o == 0 && laid_out_rank() && !columns_ ? activation_layout() : TensorLayout{};
  }
  // In f32 they follow from the node alone; in bf16 from the primitive prepare() chose.
  bool layouts_known_unprepared() const override {
    return compute_type() == dnnl::memory::data_type::f32;
  }

 private:
  bool laid_out_rank() const { return rank_ == 4 || rank_ == 3; }

  int64_t group_ = 1;
  size_t rank_ = 0;
  bool bf16_src_ = false;
  bool columns_ = false;         // may run as DeconvColumns (it prefers plain tensors)
  bool columns_active_ = false;  // runs as DeconvColumns
  DeconvColumns columns_kernel_;
  spatial::Window window_;
  Primitive primitive_;
  LayoutBridge src_;
  LayoutBridge dst_;
  PackedWeights weights_;
  dnnl::memory bias_;
};

}  // namespace

void register_deconvolution(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "ConvTranspose", make_kernel<DeconvKernel>);
}

}  // namespace troupe::kernels::onednn
