// Conv (1-D to 3-D, groups, dilations, asymmetric pads, auto_pad, optional bias) on oneDNN's
// convolution primitive. The primitive picks its own layouts (format_tag::any) except where the
// graph compiler keeps activations blocked between kernels: then it reads and writes that layout
// directly. Constant weights are reordered into the primitive's layout once; plain activations are
// reordered in and out around each run.
#include <algorithm>
#include <optional>

#include "engine/ops/fused_post_ops.hpp"
#include "engine/ops/spatial.hpp"
#include "kernels/dnnl/conv_geometry.hpp"
#include "kernels/dnnl/conv_timing.hpp"
#include "kernels/dnnl/depthwise_rows.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/narrow_conv.hpp"
#include "kernels/dnnl/post_ops.hpp"
#include "kernels/dnnl/shared_weights.hpp"
#include "kernels/dnnl/small_rows_product.hpp"
#include "kernels/dnnl/winograd_avx2.hpp"
#include "kernels/winograd.hpp"

namespace troupe::kernels::onednn {

namespace {

// Whether `md` keeps each pixel's channels together, unblocked (nwc, nhwc, ndhwc).
bool is_channels_last(const dnnl::memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  return d.format_kind == dnnl_blocked && d.ndims >= 3 && d.format_desc.blocking.inner_nblks == 0 &&
         d.format_desc.blocking.strides[1] == 1 && d.dims[1] > 1;
}

class ConvKernel final : public DnnlKernel {
 public:
  explicit ConvKernel(const KernelRequest& request) : DnnlKernel(request) {
    group_ = request.node.attributes.get_int_or("group", 1);
    if (group_ < 1 || request.inputs.size() < 2 || !has_input(1) || present_outputs(request) != 1)
      throw Unsupported{};
    fused_sum_ = fused::has_sum(request.node);
    fused_dw_ = fused::has_depthwise(request.node);
    if (!supports_fused_activation(request.node)) throw Unsupported{};
    if (fused_dw_) {
      if (fused_sum_ || request.inputs.size() != 5 || !has_input(3) || !has_input(4))
        throw Unsupported{};
      dw_node_ = fused::depthwise_node(request.node, request.inputs[3].shape[0]);
      if (!supports_fused_activation(dw_node_)) throw Unsupported{};
    }
    if (fused_sum_ && (request.inputs.size() != 4 || !has_input(3))) throw Unsupported{};
    window_ = convolution_window(request);
    rank_ = request.inputs[0].shape.rank();
    // Read for every convolution, so that a malformed value is named whatever the CPU and the
    // convolution.
    depthwise_rows_allowed_ = depthwise_rows_allowed();
    const Shape& weights = request.inputs[1].shape;
    narrow_candidate_ = narrow_conv_allowed() && rank_ == 4 && group_ == 1 && !fused_dw_ &&
                        !fused_sum_ && compute_type() == dnnl::memory::data_type::f32 &&
                        weights.is_static() && weights[0] <= NarrowConv::max_out_channels &&
                        weights[2] * weights[3] > 1;
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const Dims src = to_dims(inputs[0]);
    const Dims weights = to_dims(inputs[1]);
    const Dims dst = to_dims(outputs[0]);
    if (src.size() < 3 || src.size() > 5 || weights.size() != src.size() ||
        dst.size() != src.size() || (fused_dw_ && src.size() != 4))
      return false;
    // oneDNN 2.6's 1x1 kernels with a dw post-op mis-address channels-last tensors (a segfault on
    // AVX2; fixed in oneDNN 2.7 for its sse41, avx2 and avx512 kernels): a fused pair runs only on
    // plain or channel-blocked tensors, and never asks for channels-last (below).
    if (fused_dw_ && (input_layout(0).channels_last || output_layout(0).channels_last))
      return false;
    const int64_t out_channels = weights[0];
    if (src[1] != weights[1] * group_ || out_channels % group_ != 0 || dst[1] != out_channels)
      return false;
    depthwise_rows_active_ = false;
    row_product_active_ = uses_row_product(src, weights, dst, inputs);
    if (row_product_active_) return true;
    pointwise_active_ = uses_pointwise_product(src, weights, dst, inputs);
    if (pointwise_active_) return true;
    spatial::Window window = window_;
    window.kernel.assign(weights.begin() + 2, weights.end());
    const spatial::Geometry g =
        spatial::forward_geometry(node_, window, spatial::spatial_dims(inputs[0]));
    // With a fused depthwise convolution the primitive is described by this convolution's own
    // output; its dst then has the depthwise output's dims.
    Dims conv_dst = dst;
    if (fused_dw_) {
      conv_dst = {src[0], out_channels, g.output[0], g.output[1]};
      const int64_t s = fused::depthwise_stride(node_);
      if (dst != Dims{src[0], out_channels, (g.output[0] - 1) / s + 1, (g.output[1] - 1) / s + 1})
        return false;
    }
    const std::optional<ConvDims> dims = conv_dims(window, g, conv_dst);
    if (!dims) return false;
    narrow_active_ = uses_narrow_conv(src, weights, dst, window, g);
    if (narrow_active_) return true;
    // Named copies: lambdas below capture them (C++17 lambdas cannot capture bindings).
    const Dims strides = dims->strides, dilation = dims->dilation;
    const Dims pad_l = dims->pad_l, pad_r = dims->pad_r;
    const Dims plain_weights = grouped_weights(weights, group_);
    const dnnl::memory::desc src_md = tensor_desc(src, input_layout(0));
    const dnnl::memory::desc weights_md = plain_f32(plain_weights);
    const dnnl::memory::desc dst_md = tensor_desc(dst, output_layout(0));
    // The residual is read as a tensor of dst's shape (the graph compiler fuses only such sums).
    if (fused_sum_ && to_dims(inputs[3]) != dst) return false;
    // oneDNN 2.6's f32 1x1 kernels with a depthwise post-op (jit_avx2_1x1_convolution.cpp and its
    // sse41 and avx512_common twins) set the depthwise bias pointer only `if (bias)`, testing the
    // 1x1 convolution's bias: without one the depthwise kernel reads an uninitialized pointer (a
    // segfault on AVX2). A fused pair therefore always passes a bias, zeros where the model has
    // none.
    with_bias_ = has_input(2) || fused_dw_;
    if (has_input(2) && inputs[2].element_count() != out_channels) return false;
    const dnnl::memory::desc bias_md = plain_f32({out_channels});
    zero_bias_ = has_input(2) ? Tensor() : Tensor(ElementType::f32, Shape{out_channels});
    if (!zero_bias_.empty()) std::fill_n(zero_bias_.data<float>(), out_channels, 0.f);

    // The primitive always chooses its weights layout: constant weights are packed once, weights
    // that are a model input are reordered on every run. Forcing plain weights instead made
    // oneDNN 2.6 pick jit kernels that read them as blocked (a segfault with W as a model input,
    // e.g. IC=3, OC=5 on jit:avx2).
    // In bf16, src and weights are bf16 (src converted from the f32 tensor on each run, in its
    // layout when it has one) and dst stays f32; where oneDNN has no bf16 implementation for this
    // instance, the kernel computes in f32.
    auto create = [&](bool assigned_layouts,
                      dnnl::algorithm algorithm = dnnl::algorithm::convolution_direct,
                      bool with_activation = true, bool in_f32 = false) {
      return create_in(in_f32 ? dnnl::memory::data_type::f32 : compute_type(),
                       [&](dnnl::memory::data_type type) {
                         return make_primitive_desc(type, algorithm, src, plain_weights, conv_dst,
                                                    src_md, bias_md, strides, dilation, pad_l,
                                                    pad_r, assigned_layouts, with_activation);
                       });
    };
    winograd_active_ = false;
    activation_after_ = InPlaceActivation();
    if (uses_avx2_winograd(plain_weights, src, conv_dst, pad_l, src_md, dst_md)) {
      set_impl("winograd_4x3:avx2");
      return true;
    }
    // Winograd computes a 3x3 stride-1 convolution with about half the multiplications (oneDNN
    // 2.6 has it for f32 on AVX-512, on nChw16c; ResNet-50's took 0.48-0.71x of the direct
    // kernel's time on Zen 4). Its results differ from the direct kernel's by rounding only: on
    // the zoo's CNNs, as much as AVX2's direct kernels differ from AVX-512's.
    std::optional<dnnl::convolution_forward::primitive_desc> winograd;
    if (tries_winograd(plain_weights)) {
      winograd = winograd_desc(create);
    }
    // In a model computed in bf16, f32 Winograd runs only where it was timed faster than the
    // bf16 direct kernel on this shape. On Zen 4 it was 0.69-1.0x the bf16 time on U-Net's
    // convolutions, 1.07-2.2x on Inception-v3's 147x147 and 35x35 ones, and ResNet-18's went both
    // ways: no rule of thumb (tile size, channels, image size) sorted them.
    std::optional<dnnl::convolution_forward::primitive_desc> direct;
    if (winograd && compute_type() != dnnl::memory::data_type::f32) {
      direct = create(true);
      const std::string key =
          "bf16 direct or f32 Winograd: " + shape_key(src, weights, dst, pad_l, pad_r);
      if (!faster_convolution(key, *winograd, *direct, with_bias_, 0.9)) {
        winograd.reset();
        activation_after_ = InPlaceActivation();
      }
    }
    dnnl::convolution_forward::primitive_desc pd = winograd ? *winograd
                                                   : direct ? *direct
                                                            : create(true);
    // oneDNN answers a layout its JIT kernels cannot run with its own reference kernel (on AVX2,
    // nChw8c with dilations of 3 and more: `ref:any`, orders of magnitude slower). Then let it
    // choose the layouts and reorder the tensors around the primitive instead.
    depthwise_rows_active_ = uses_depthwise_rows(pd, src, weights, dst, window, g);
    if (depthwise_rows_active_) return true;
    const bool laid_out = !input_layout(0).order().is_plain() || !output_layout(0).is_plain();
    if (laid_out) pd = unless_reference(pd, [&] { return create(false); });
    // oneDNN 2.6.3's SSE4.1 depthwise kernel crashes on channels-last tensors with a sum post-op
    // (any window; its AVX2 and AVX-512 kernels do not): below AVX2 such a node runs the
    // reference kernel.
    if (fused_sum_ && std::string(pd.impl_info_str()) == "jit_dw:sse41" &&
        is_channels_last(pd.dst_desc()))
      return false;
    if (fused_dw_) {
      const int dw = DNNL_ARG_ATTR_POST_OP_DW;
      dw_weights_ = PackedWeights(plain_f32({out_channels, 1, 1, 3, 3}),
                                  pd.query_md(dnnl::query::exec_arg_md, dw | DNNL_ARG_WEIGHTS),
                                  constant(3), stream_);
      dw_bias_ = unbound_memory(pd.query_md(dnnl::query::exec_arg_md, dw | DNNL_ARG_BIAS));
    }
    primitive_ = Primitive::of<dnnl::convolution_forward>(pd);
    bf16_src_ = pd.src_desc().data_type() == dnnl::memory::data_type::bf16;
    src_ = LayoutBridge(src_md, pd.src_desc(), 0);
    dst_ = LayoutBridge(dst_md, pd.dst_desc(), 1);
    if (fused_sum_) residual_ = LayoutBridge(tensor_desc(dst, input_layout(3)), pd.dst_desc(), 2);
    weights_ = PackedWeights(weights_md, pd.weights_desc(), constant(1), stream_);
    bias_ = unbound_memory(bias_md);
    set_impl(pd);
    // oneDNN 2.6 computes the pair in one JIT kernel only for some shapes (MobileNetV2's first
    // stride-2 pair); for others it runs `ref_fused_convolution`, the two convolutions in turn.
    // The graph compiler fuses only pairs its trial kernel runs in one pass, so the second case
    // is met only at shapes first seen at run time.
    // A pair asked to compute in bf16 that computes in f32 says so after the suffix: the graph
    // compiler then leaves the pair to two bf16 convolutions.
    if (fused_dw_ && !is_reference(pd)) {
      const bool in_f32 = Kernel::computes_f32_instead_of_bf16(implementation());
      set_impl(std::string(pd.impl_info_str()) + fused::one_pass_depthwise_suffix +
               (in_f32 ? Kernel::f32_instead_of_bf16 : ""));
    }
    return true;
  }

  // On AVX2 (oneDNN has no Winograd kernel there) troupe's own F(4x4, 3x3) computes the
  // convolutions oneDNN's AVX-512 ones would, on the nChw8c activations of that ISA (plain
  // tensors, as a model with dynamic shapes has, are reordered to and from them, as the direct
  // kernel's are).
  bool uses_avx2_winograd(const Dims& weights, const Dims& src, const Dims& dst, const Dims& pad_l,
                          const dnnl::memory::desc& src_md, const dnnl::memory::desc& dst_md) {
    const TensorLayout blocked = TensorLayout::blocked(8);
    const auto readable = [&](TensorLayout layout) {
      return layout == blocked || layout == TensorLayout{};
    };
    if (activation_layout() != blocked || !winograd_candidate() ||
        !winograd_geometry(node_, weights, 8) || src.size() != 4 || !readable(input_layout(0)) ||
        !readable(output_layout(0)) || (fused_sum_ && !readable(input_layout(3))))
      return false;
    Avx2Winograd::Geometry g;
    g.batch = src[0];
    g.in_channels = src[1];
    g.out_channels = dst[1];
    g.in_height = src[2];
    g.in_width = src[3];
    g.out_height = dst[2];
    g.out_width = dst[3];
    g.pad_top = pad_l[0];
    g.pad_left = pad_l[1];
    if (!Avx2Winograd::supports(g)) return false;
    // The weights are transformed once for every stream and shape (shared like packed ones); a
    // new batch or image size only resizes the tiles.
    const int64_t in = g.in_channels, out = g.out_channels;
    if (!winograd_avx2_ || winograd_avx2_->in_channels() != in ||
        winograd_avx2_->out_channels() != out) {
      const dnnl::memory::desc transformed = plain_f32({Avx2Winograd::transformed_size(in, out)});
      winograd_weights_ = shared_transformed_weights(
          *constant(1), plain_f32(weights), transformed, [&](const Tensor& w, dnnl::memory& to) {
            Avx2Winograd::transform_weights(in, out, w.data<float>(),
                                            static_cast<float*>(to.get_data_handle()));
          });
      winograd_avx2_ = std::make_unique<Avx2Winograd>(
          in, out, static_cast<const float*>(winograd_weights_->packed.get_data_handle()));
    }
    winograd_avx2_->set_geometry(g);
    winograd_src_ = LayoutBridge(src_md, tensor_desc(src, blocked), 0);
    winograd_dst_ = LayoutBridge(dst_md, tensor_desc(dst, blocked), 1);
    if (fused_sum_)
      winograd_residual_ =
          LayoutBridge(tensor_desc(dst, input_layout(3)), tensor_desc(dst, blocked), 2);
    // ReLU is applied in the output transform; another fused activation (SiLU, LeakyReLU, clip,
    // ...) by oneDNN's eltwise kernel in place on the output, a pass over it where the direct
    // kernel has a post-op.
    if (!winograd_activation_.prepare(node_, tensor_desc(dst, blocked))) return false;
    winograd_active_ = true;
    return true;
  }

  // oneDNN's Winograd primitive, nullopt where it has none but its reference kernel. Its kernels
  // take ReLU and the residual sum as post-ops and refuse other activations (SiLU, HardSwish,
  // GELU, ...): then the primitive computes the convolution (and the sum) and oneDNN's eltwise
  // applies the activation in place after it. That extra pass over the output costs far less
  // than Winograd saves: on Zen 4 a YOLO-style detector's 3x3 SiLU convolutions took 0.55-0.69 ms
  // instead of 1.0-1.1 ms direct, and whole models ran 1.14x (that detector), 1.18x
  // (EfficientNetV2-S, SiLU) and 1.45x (ESPCN, Tanh) as fast (benchmarks/README.md).
  // In a model computed in bf16 the primitive is the f32 one (its src converted as it is read,
  // its dst written in f32).
  template <class Create>
  std::optional<dnnl::convolution_forward::primitive_desc> winograd_desc(Create& create) {
    const auto winograd = dnnl::algorithm::convolution_winograd;
    const bool in_f32 = compute_type() != dnnl::memory::data_type::f32;
    try {
      auto pd = create(true, winograd, true, in_f32);
      if (!is_reference(pd)) return pd;
    } catch (const dnnl::error&) {
      // this shape, layout or post-op has no Winograd kernel
    }
    if (fused::activation(node_).empty()) return std::nullopt;
    try {
      auto pd = create(true, winograd, false, in_f32);
      // The activation runs on what the primitive writes, in its layout (not ReLU, which
      // prepare() leaves to the caller's store: the primitive must then take it itself).
      if (is_reference(pd) || !activation_after_.prepare(node_, pd.dst_desc()) ||
          !activation_after_) {
        activation_after_ = InPlaceActivation();
        return std::nullopt;
      }
      return pd;
    } catch (const dnnl::error&) {
      return std::nullopt;
    }
  }

  // Constant weights only: they are transformed once (oneDNN cannot reorder them back, and
  // weights given at run time would be transformed on every run).
  bool tries_winograd(const Dims& weights) const {
    return winograd_candidate() && winograd_shape(node_, weights);
  }

  // A 1x1 convolution of one-pixel images in a batch of one or two (a squeeze-and-excitation
  // block's two fully connected layers, after the global pooling): a product of one or two rows
  // by the constant weights, which oneDNN's convolution kernels ran at ~9 GB/s of weights on one
  // Zen 4 core. SmallRowsProduct streams them, from a copy transposed to [in, out] once. Only
  // where every operand's layout stores a pixel's channels as one dense row (plain,
  // channels-last, or whole channel blocks), read and written in place.
  bool uses_row_product(const Dims& src, const Dims& weights, const Dims& dst,
                        const std::vector<Shape>& inputs) {
    const int64_t in = src[1], out = dst[1];
    const auto one_pixel = [](const Dims& d) {
      return std::all_of(d.begin() + 2, d.end(), [](int64_t v) { return v == 1; });
    };
    const auto dense_row = [](const TensorLayout& l, int64_t channels) {
      return !l.bf16 && (l.is_plain() || l.channels_last ||
                         (l.channel_block > 0 && channels % l.channel_block == 0));
    };
    const std::vector<int64_t> pads = node_.attributes.get_ints_or("pads", {});
    if (group_ != 1 || fused_dw_ || compute_type() != dnnl::memory::data_type::f32 ||
        !constant(1) || src[0] > SmallRowsProduct::max_rows ||
        out < SmallRowsProduct::min_streamed_columns || !one_pixel(src) || !one_pixel(dst) ||
        !one_pixel(weights) ||
        std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }) ||
        !dense_row(input_layout(0), in) || !dense_row(output_layout(0), out) ||
        (fused_sum_ && !dense_row(input_layout(3), out)) ||
        (has_input(2) && inputs[2].element_count() != out))
      return false;
    // The weights [out, in, 1...] are B stored [N, K].
    row_product_ = SmallRowsProduct{};
    row_product_.m = src[0];
    row_product_.k = in;
    row_product_.n = out;
    row_product_.trans_b = true;
    row_product_.c_cols = out;
    if (!row_product_.prepare(node_, *constant(1), stream_)) return false;
    set_impl(row_product_.implementation());
    return true;
  }

  // A 1x1 convolution (stride 1, no padding, one group) reading and writing plain tensors:
  // per image, the product of the weights [out, in] and the image's [in, pixels], one oneDNN
  // matmul over the batch with the bias, residual sum and activation as its post-ops. oneDNN's
  // 1x1 convolution kernels convert plain tensors to their layout and back: MobileViT-v2's
  // attention projections on [96, 4, 256] patch tensors (193 channels, left plain) ran 1.8x this
  // product's time (one Zen 5 thread).
  bool uses_pointwise_product(const Dims& src, const Dims& weights, const Dims& dst,
                              const std::vector<Shape>& inputs) {
    const auto all_one = [](auto begin, auto end) {
      return std::all_of(begin, end, [](int64_t v) { return v == 1; });
    };
    const std::vector<int64_t> pads = node_.attributes.get_ints_or("pads", {});
    const std::vector<int64_t> strides = node_.attributes.get_ints_or("strides", {});
    if (group_ != 1 || fused_dw_ || compute_type() != dnnl::memory::data_type::f32 ||
        !all_one(weights.begin() + 2, weights.end()) || !all_one(strides.begin(), strides.end()) ||
        std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }) ||
        !std::equal(src.begin() + 2, src.end(), dst.begin() + 2) || !input_layout(0).is_plain() ||
        !output_layout(0).is_plain() || (fused_sum_ && !input_layout(3).is_plain()) ||
        (has_input(2) && inputs[2].element_count() != dst[1]))
      return false;
    int64_t pixels = 1;
    for (size_t d = 2; d < src.size(); ++d) pixels *= src[d];
    const int64_t batch = src[0], in = src[1], out = dst[1];
    // Few pixels, or few channels (EDSR's 3 -> 3 mean shifts: 1.26x slower as a product): the
    // convolution's kernels block them better.
    if (pixels < 64 || in < 16 || out < 16) return false;
    using tag = dnnl::memory::format_tag;
    const auto f32 = dnnl::memory::data_type::f32;
    const dnnl::memory::desc w_md({1, out, in}, f32, tag::abc);
    const dnnl::memory::desc x_md({batch, in, pixels}, f32, tag::abc);
    const dnnl::memory::desc y_md({batch, out, pixels}, f32, tag::abc);
    const dnnl::memory::desc b_md({1, out, 1}, f32, tag::abc);
    // The bias per output channel (per row of the product) as a binary post-op: oneDNN 2.6's
    // brgemm matmul takes a bias per column only (per row it answers with its reference).
    dnnl::post_ops ops;
    if (has_input(2)) ops.append_binary(dnnl::algorithm::binary_add, b_md);
    if (fused_sum_) ops.append_sum(1.f);
    append_fused_activation(node_, ops);
    try {
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(w_md, x_md, y_md),
                                            primitive_attributes(ops), cpu_engine());
      if (is_reference(pd)) return false;
      primitive_ = Primitive::of<dnnl::matmul>(pd);
      pointwise_w_ = unbound_memory(w_md);
      pointwise_x_ = unbound_memory(x_md);
      pointwise_y_ = unbound_memory(y_md);
      pointwise_b_ = unbound_memory(b_md);
      set_impl(std::string("pointwise_matmul:") + pd.impl_info_str());
      return true;
    } catch (const dnnl::error&) {
      return false;  // no matmul for this instance: the convolution's kernels
    }
  }

  // A depthwise convolution (one filter per channel) that oneDNN computes only as an im2col GEMM
  // or on its reference kernel (1-D ones with long kernels, 3-D ones: QuartzNet's 33-87 taps ran
  // at 1-3 GMAC/s, 2.2-3.5 ms each): troupe's own loops, on plain, channel-blocked or
  // channels-last tensors read and written in place. ReLU is applied as they store; another fused
  // activation by oneDNN's eltwise kernel in place after them.
  bool uses_depthwise_rows(const dnnl::convolution_forward::primitive_desc& pd, const Dims& src,
                           const Dims& weights, const Dims& dst, const spatial::Window& window,
                           const spatial::Geometry& geometry) {
    if (!depthwise_rows_allowed_) return false;
    const std::string impl = pd.impl_info_str();
    // oneDNN 2.6 has no depthwise kernel for 3-D convolutions: on channels-last tensors its
    // direct grouped one (jit) took X3D's 3x3x3 depthwise convolutions at 2.4x these loops' time.
    if (!is_reference(pd) && impl.find("gemm") == std::string::npos && src.size() != 5)
      return false;
    const TensorLayout layout = output_layout(0);
    const int64_t channels = src[1];
    // Channels-last tensors are computed 16 (or 8) channels of a position at a time, the last
    // group overlapping the one before where that does not divide the channels: not with a
    // residual, which may share the output's memory (an overlapping group would add it twice).
    const int64_t block = !layout.channels_last ? layout.channel_block : channels >= 16 ? 16 : 8;
    if (layout.channels_last && (channels < block || (fused_sum_ && channels % block != 0)))
      return false;
    if (fused_dw_ || group_ != channels || dst[1] != channels || weights[1] != 1 || layout.bf16 ||
        !(input_layout(0) == layout) || (fused_sum_ && !(input_layout(3) == layout)) ||
        !DepthwiseRows::supports_block(block) ||
        (block > 0 && !layout.channels_last && channels % block != 0))
      return false;
    const std::string activation = fused::activation(node_);
    depthwise_activation_ = InPlaceActivation();
    if (activation != "Relu" &&
        !depthwise_activation_.prepare(node_, tensor_desc(dst, output_layout(0))))
      return false;
    DepthwiseGeometry g;
    g.batch = src[0];
    g.channels = channels;
    g.block = block;
    g.channels_last = layout.channels_last;
    g.window = reference::to_window3d(window, geometry);
    depthwise_ = DepthwiseRows();
    depthwise_.prepare(g);
    depthwise_relu_ = activation == "Relu";
    if (const Tensor* w = constant(1)) depthwise_.set_weights(w->contiguous().data<float>());
    // In a model computed in bf16 they compute in f32 (and say so): a depthwise convolution is
    // bound by memory, and the GEMM they replace ran at a fraction of either.
    set_impl(std::string("depthwise_rows") +
             (compute_type() == dnnl::memory::data_type::f32 ? "" : f32_instead_of_bf16));
    return true;
  }

  // A convolution to 1-4 channels (a head, a network's last layer) reading channel-blocked or
  // channels-last activations and writing a plain tensor: troupe's loops (narrow_conv.hpp).
  // ReLU is applied as they store; another fused activation by oneDNN's eltwise kernel after.
  bool uses_narrow_conv(const Dims& src, const Dims& weights, const Dims& dst,
                        const spatial::Window& window, const spatial::Geometry& geometry) {
    if (!narrow_candidate_ || !output_layout(0).is_plain() || weights[2] * weights[3] == 1)
      return false;
    const TensorLayout in = input_layout(0);
    const int64_t channels = src[1];
    int64_t block = 0;
    if (in.bf16) return false;
    if (in.channels_last)
      block = channels % 16 == 0 ? 16 : channels % 8 == 0 ? 8 : 0;
    else if ((in.channel_block == 8 || in.channel_block == 16) && channels % in.channel_block == 0)
      block = in.channel_block;
    if (block == 0) return false;
    const std::string activation = fused::activation(node_);
    narrow_activation_ = InPlaceActivation();
    if (activation != "Relu" && !narrow_activation_.prepare(node_, plain_f32(dst))) return false;
    NarrowConvGeometry n;
    n.batch = src[0];
    n.channels = channels;
    n.block = block;
    n.channels_last = in.channels_last;
    n.out_channels = weights[0];
    n.window = reference::to_window3d(window, geometry);
    narrow_ = NarrowConv();
    narrow_.prepare(n);
    narrow_relu_ = activation == "Relu";
    if (const Tensor* w = constant(1)) narrow_.set_weights(w->contiguous().data<float>());
    set_impl("narrow_conv");
    return true;
  }

  // What every Winograd kernel needs, oneDNN's or troupe's: f32 (or bf16 where it may run as
  // f32 Winograd), constant weights, no fused depthwise convolution, and not turned off.
  bool winograd_candidate() const {
    return !fused_dw_ && constant(1) &&
           (compute_type() == dnnl::memory::data_type::f32 || bf16_takes_f32_winograd()) &&
           winograd_allowed();
  }

  // Everything the speed of this convolution depends on, for faster_convolution.
  std::string shape_key(const Dims& src, const Dims& weights, const Dims& dst, const Dims& pad_l,
                        const Dims& pad_r) const {
    std::string key;
    for (const Dims* dims : {&src, &weights, &dst, &pad_l, &pad_r}) {
      for (int64_t d : *dims) key += std::to_string(d) + ",";
      key += ";";
    }
    for (const TensorLayout& l : {input_layout(0), output_layout(0)})
      key += std::to_string(l.channel_block) + (l.channels_last ? "c" : "") + (l.bf16 ? "b" : "") +
             ";";
    key += fused::activation(node_) + (fused_sum_ ? ";sum" : "") + (with_bias_ ? ";bias" : "");
    return key;
  }

  dnnl::convolution_forward::primitive_desc make_primitive_desc(
      dnnl::memory::data_type type, dnnl::algorithm algorithm, const Dims& src, const Dims& weights,
      const Dims& dst, const dnnl::memory::desc& src_md, const dnnl::memory::desc& bias_md,
      const Dims& strides, const Dims& dilation, const Dims& pad_l, const Dims& pad_r,
      bool assigned_layouts, bool with_activation) {
    auto any = [](const Dims& dims, dnnl::memory::data_type t) {
      return dnnl::memory::desc(dims, t, dnnl::memory::format_tag::any);
    };
    const auto f32 = dnnl::memory::data_type::f32;
    const auto kind = dnnl::prop_kind::forward_inference;
    // A laid-out tensor is read/written in its layout (a bf16 src as bf16 in that layout, which
    // the src reorder converts to); a plain one lets the primitive choose.
    // (A src stored as bf16 is read in its order; an f32 fallback reorders it to f32.)
    // With assigned_layouts false the primitive chooses every layout (the tensors are reordered).
    const TensorLayout src_order = assigned_layouts ? input_layout(0).order() : TensorLayout{};
    const dnnl::memory::desc src_choice =
        src_order.is_plain() ? any(src, type) : tensor_desc(src, src_order, type);
    const dnnl::memory::desc weights_choice = any(weights, type);
    // `dst` is this convolution's own output (with a fused depthwise one, the primitive's dst has
    // the depthwise output's dims in the same layout). A primitive computing in bf16 writes a
    // value stored as bf16 itself; one that fell back to f32 writes f32, which dst_ converts.
    const TensorLayout dst_layout = type == f32 ? output_layout(0).order() : output_layout(0);
    // With a depthwise convolution fused after it, dst is the intermediate value between the two
    // (the primitive's output is the depthwise one's): in bf16, oneDNN's one-pass pair keeps it
    // in bf16.
    const auto intermediate = fused_dw_ ? type : f32;
    const dnnl::memory::desc dst_choice = !assigned_layouts || dst_layout.is_plain()
                                              ? any(dst, intermediate)
                                              : tensor_desc(dst, dst_layout, intermediate);
    dnnl::convolution_forward::desc desc =
        with_bias_
            ? dnnl::convolution_forward::desc(kind, algorithm, src_choice, weights_choice, bias_md,
                                              dst_choice, strides, dilation, pad_l, pad_r)
            : dnnl::convolution_forward::desc(kind, algorithm, src_choice, weights_choice,
                                              dst_choice, strides, dilation, pad_l, pad_r);
    // Fused post-ops: the residual is summed into dst (prefilled with it at run), then Relu.
    dnnl::post_ops ops;
    if (fused_sum_) ops.append_sum(1.f);
    if (with_activation) append_fused_activation(node_, ops);
    if (fused_dw_) {
      const auto s = fused::depthwise_stride(node_);
      ops.append_dw(type, f32, f32, 3, s, 1, 0, {1.f});
      append_fused_activation(dw_node_, ops);
    }
    return dnnl::convolution_forward::primitive_desc(desc, primitive_attributes(ops), cpu_engine());
  }

  const PackedWeights* packed_weights(size_t i) const override {
    // The loops and the pointwise product read the constant as it is.
    if (i == 1 && (narrow_active_ || pointwise_active_)) return nullptr;
    if (i == 1) return row_product_active_ ? row_product_.packed_b() : &weights_;
    return i == 3 && fused_dw_ ? &dw_weights_ : nullptr;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    if (winograd_active_) {
      const auto data = [](const dnnl::memory& m) {
        return static_cast<float*>(m.get_data_handle());
      };
      const float* src = data(winograd_src_.to_internal(inputs[0], stream_));
      const float* residual =
          fused_sum_ ? data(winograd_residual_.to_internal(inputs[3], stream_)) : nullptr;
      float* dst = data(winograd_dst_.output_memory(outputs[0]));
      winograd_avx2_->run(src, has_input(2) ? inputs[2].data<float>() : nullptr, residual,
                          winograd_activation_.relu_in_store(), dst);
      winograd_activation_.run(dst, stream_);
      winograd_dst_.from_internal(outputs[0], stream_);
      return;
    }
    if (narrow_active_) {
      if (!constant(1)) narrow_.set_weights(inputs[1].contiguous().data<float>());
      const Tensor x = inputs[0].contiguous();
      const Tensor bias = has_input(2) ? inputs[2].contiguous() : Tensor();
      float* y = outputs[0].data<float>();
      narrow_.run(x.data<float>(), bias.empty() ? nullptr : bias.data<float>(), narrow_relu_, y);
      narrow_activation_.run(y, stream_);
      return;
    }
    if (depthwise_rows_active_) {
      // Weights given at run time are taken into the loops' order on every run.
      if (!constant(1)) depthwise_.set_weights(inputs[1].contiguous().data<float>());
      const Tensor x = inputs[0].contiguous();
      const Tensor bias = has_input(2) ? inputs[2].contiguous() : Tensor();
      const Tensor residual = fused_sum_ ? inputs[3].contiguous() : Tensor();
      float* y = outputs[0].data<float>();
      depthwise_.run(x.data<float>(), bias.empty() ? nullptr : bias.data<float>(),
                     residual.empty() ? nullptr : residual.data<float>(), depthwise_relu_, y);
      depthwise_activation_.run(y, stream_);
      return;
    }
    if (pointwise_active_) {
      // Plain tensors read and written in place; the residual is summed into the output.
      if (fused_sum_) inputs[3].copy_to(outputs[0]);
      const Tensor w = inputs[1].contiguous();
      const Tensor x = inputs[0].contiguous();
      bind(pointwise_w_, w);
      bind(pointwise_x_, x);
      bind(pointwise_y_, outputs[0]);
      std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, pointwise_w_},
                                                    {DNNL_ARG_WEIGHTS, pointwise_x_},
                                                    {DNNL_ARG_DST, pointwise_y_}};
      const Tensor b = has_input(2) ? inputs[2].contiguous() : Tensor();
      if (has_input(2)) {
        bind(pointwise_b_, b);
        args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = pointwise_b_;
      }
      primitive_.execute(stream_, args);
      return;
    }
    if (row_product_active_) {
      // A dense row per pixel in every operand's layout: read and written in place.
      if (fused_sum_) inputs[3].copy_to(outputs[0]);
      row_product_.run(inputs[0], inputs[1], has_input(2) ? &inputs[2] : nullptr, outputs[0],
                       fused_sum_, stream_);
      return;
    }
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, src_.to_internal(inputs[0], stream_)},
        {DNNL_ARG_WEIGHTS, weights_.get(inputs[1], stream_)}};
    if (with_bias_) {
      bind(bias_, zero_bias_.empty() ? inputs[2] : zero_bias_);
      args[DNNL_ARG_BIAS] = bias_;
    }
    const dnnl::memory& dst =
        fused_sum_ ? prefilled_dst(inputs[3], outputs[0]) : dst_.output_memory(outputs[0]);
    args[DNNL_ARG_DST] = dst;
    if (fused_dw_) {
      bind(dw_bias_, inputs[4]);
      args[DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS] = dw_weights_.get(inputs[3], stream_);
      args[DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS] = dw_bias_;
    }
    primitive_.execute(stream_, args);
    activation_after_.run(static_cast<float*>(dst.get_data_handle()), stream_);
    dst_.from_internal(outputs[0], stream_);
  }

 private:
  // The sum post-op accumulates into dst: start it from the residual, in dst's layout.
  const dnnl::memory& prefilled_dst(const Tensor& residual, Tensor& output) {
    const dnnl::memory& dst = dst_.output_memory(output);
    residual_.to_memory(residual, dst, stream_);
    return dst;
  }

 public:
  TensorLayout preferred_input_layout(size_t i) const override {
    const bool activation = i == 0 || (i == 3 && fused_sum_);
    if (!activation || !laid_out_rank() || !takes_activation_layout()) return {};
    // A primitive that reads bf16 would rather be given bf16, its residual too (the sum starts
    // from it, converted to dst's type either way).
    return bf16_src_ ? activation_layout().in_bf16() : activation_layout();
  }
  // In f32 they follow from the node alone; in bf16 from the primitive prepare() chose.
  bool layouts_known_unprepared() const override {
    return compute_type() == dnnl::memory::data_type::f32;
  }
  // Computing in bf16, it can write bf16 (stored so where every reader reads bf16: between bf16
  // convolutions an activation is then neither written nor converted as f32). Not with a fused
  // depthwise convolution, whose post-op writes f32.
  TensorLayout preferred_output_layout(size_t o) const override {
    // A convolution to a few channels writes plain tensors (its loops do; a channel block would
    // be mostly padding).
    if (o != 0 || !laid_out_rank() || !takes_activation_layout() || narrow_candidate_) return {};
    return bf16_src_ && !fused_dw_ ? activation_layout().in_bf16() : activation_layout();
  }

 private:
  // 2-D convolutions, and 1-D ones (temporal convolution networks): their chains keep the
  // activation layout too (a TCN's plain tensors cost a reorder in and out of each convolution,
  // about a third of its time).
  bool laid_out_rank() const { return rank_ >= 3 && rank_ <= 5; }
  bool takes_activation_layout() const { return !(fused_dw_ && activation_layout().channels_last); }

 private:
  int64_t group_ = 1;
  size_t rank_ = 0;
  bool bf16_src_ = false;  // the primitive reads src as bf16
  spatial::Window window_;
  bool with_bias_ = false;
  bool fused_sum_ = false;
  bool fused_dw_ = false;  // a depthwise convolution follows (engine/ops/fused_post_ops.hpp)
  Node dw_node_;           // ... described as a node of its own
  Primitive primitive_;
  PackedWeights dw_weights_;  // the fused depthwise convolution's weights and bias
  dnnl::memory dw_bias_;
  LayoutBridge src_;
  LayoutBridge dst_;
  LayoutBridge residual_;  // from the residual's layout into dst's (fused sum)
  PackedWeights weights_;
  dnnl::memory bias_;
  Tensor zero_bias_;  // the bias of a fused pair whose 1x1 convolution has none
  std::shared_ptr<const SharedWeights> winograd_weights_;  // transformed, kept across shapes
  std::unique_ptr<Avx2Winograd> winograd_avx2_;
  bool winograd_active_ = false;  // winograd_avx2_ runs the convolution instead of primitive_
  LayoutBridge winograd_src_, winograd_dst_, winograd_residual_;  // to and from nChw8c
  InPlaceActivation winograd_activation_;  // ReLU in the output transform, others after it
  InPlaceActivation activation_after_;     // the activation oneDNN's Winograd primitive refused
  bool row_product_active_ = false;        // row_product_ computes it (uses_row_product)
  bool pointwise_active_ = false;          // a matmul computes it (uses_pointwise_product)
  dnnl::memory pointwise_w_, pointwise_x_, pointwise_y_, pointwise_b_;
  bool narrow_candidate_ = false;  // may run NarrowConv (TROUPE_NARROW_CONV, shapes)
  bool narrow_active_ = false;     // narrow_ computes it (uses_narrow_conv)
  bool narrow_relu_ = false;
  NarrowConv narrow_;
  InPlaceActivation narrow_activation_;  // a fused activation other than ReLU, after it
  bool depthwise_rows_allowed_ = true;   // TROUPE_DEPTHWISE_ROWS
  bool depthwise_rows_active_ = false;   // depthwise_ computes it (uses_depthwise_rows)
  DepthwiseRows depthwise_;
  bool depthwise_relu_ = false;
  InPlaceActivation depthwise_activation_;  // a fused activation other than ReLU, after it
  SmallRowsProduct row_product_;
};

}  // namespace

void register_convolution(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "Conv", make_kernel<ConvKernel>);
}

}  // namespace troupe::kernels::onednn
