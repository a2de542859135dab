#include "kernels/reference/convolution.hpp"

#include <vector>

#include "engine/ops/spatial.hpp"
#include "kernels/reference/common.hpp"
#include "kernels/reference/fused_post_ops.hpp"
#include "kernels/reference/reference.hpp"
#include "kernels/reference/window3d.hpp"

namespace troupe::kernels::reference {

namespace {

std::vector<int64_t> output_dims(int64_t batch, int64_t channels,
                                 const spatial::Geometry& geometry) {
  std::vector<int64_t> dims{batch, channels};
  dims.insert(dims.end(), geometry.output.begin(), geometry.output.end());
  return dims;
}

// Y[n,m,o] = B[m] + sum over the channels c of m's group and the kernel taps k of
//            X[n,c,o*stride - pad_begin + k*dilation] * W[m,c,k]   (taps in the padding read 0).
template <class T>
void conv_typed(const Node& node, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  const Shape& xs = x.shape();
  const Shape& ws = w.shape();
  const int64_t batch = xs[0];
  const int64_t channels = xs[1];
  const int64_t out_channels = ws[0];
  const int64_t group = node.attributes.get_int_or("group", 1);
  const int64_t group_in = channels / group;
  const int64_t group_out = out_channels / group;
  const spatial::Window window =
      spatial::read_window(node, xs.rank() - 2, spatial::spatial_dims(ws));
  const spatial::Geometry geometry =
      spatial::forward_geometry(node, window, spatial::spatial_dims(xs));
  check_output_shape(node, y, output_dims(batch, out_channels, geometry));
  const Window3d g = to_window3d(window, geometry);

  const T* src = x.data<T>();
  const T* weights = w.data<T>();
  const T* bias = b.empty() ? nullptr : b.data<T>();
  T* dst = y.data<T>();
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t m = 0; m < out_channels; ++m) {
      const int64_t first_channel = (m / group_out) * group_in;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            double sum = bias != nullptr ? static_cast<double>(bias[m]) : 0.0;
            for (int64_t c = 0; c < group_in; ++c) {
              const T* plane = src + (n * channels + first_channel + c) * g.in_size();
              const T* kernel = weights + (m * group_in + c) * g.kernel_size();
              g.for_each_tap(od, oh, ow, [&](int64_t id, int64_t ih, int64_t iw, int64_t tap) {
                sum += static_cast<double>(plane[g.in_offset(id, ih, iw)]) *
                       static_cast<double>(kernel[tap]);
              });
            }
            *dst++ = static_cast<T>(sum);
          }
        }
      }
    }
  }
}

// The adjoint of Conv: every input element X[n,c,i] adds X[n,c,i] * W[c,m,k] to
// Y[n,m,i*stride - pad_begin + k*dilation] for the outputs m of c's group; Y starts at B[m].
template <class T>
void conv_transpose_typed(const Node& node, const Tensor& x, const Tensor& w, const Tensor& b,
                          Tensor& y) {
  const Shape& xs = x.shape();
  const Shape& ws = w.shape();
  const int64_t batch = xs[0];
  const int64_t channels = xs[1];
  const int64_t group = node.attributes.get_int_or("group", 1);
  const int64_t group_in = channels / group;
  const int64_t group_out = ws[1];
  const int64_t out_channels = group_out * group;
  const spatial::Window window =
      spatial::read_window(node, xs.rank() - 2, spatial::spatial_dims(ws));
  const spatial::Geometry geometry =
      spatial::transposed_geometry(node, window, spatial::spatial_dims(xs));
  check_output_shape(node, y, output_dims(batch, out_channels, geometry));
  // Here `in` and `out` of the window are swapped in role: source() maps an input position and a
  // tap to an output position, which must fall inside the output.
  const Window3d g = to_window3d(window, geometry);
  const auto inside_output = [&](int axis, int64_t o) { return o >= 0 && o < g.out[axis]; };

  const T* src = x.data<T>();
  const T* weights = w.data<T>();
  const T* bias = b.empty() ? nullptr : b.data<T>();
  std::vector<double> sums(static_cast<size_t>(batch * out_channels * g.out_size()), 0.0);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      const T* plane = src + (n * channels + c) * g.in_size();
      for (int64_t mg = 0; mg < group_out; ++mg) {
        const int64_t m = (c / group_in) * group_out + mg;
        const T* kernel = weights + (c * group_out + mg) * g.kernel_size();
        double* out_plane = sums.data() + (n * out_channels + m) * g.out_size();
        for (int64_t id = 0; id < g.in[0]; ++id) {
          for (int64_t ih = 0; ih < g.in[1]; ++ih) {
            for (int64_t iw = 0; iw < g.in[2]; ++iw) {
              const double value = static_cast<double>(plane[(id * g.in[1] + ih) * g.in[2] + iw]);
              for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
                const int64_t od = g.source(0, id, kd);
                if (!inside_output(0, od)) continue;
                for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
                  const int64_t oh = g.source(1, ih, kh);
                  if (!inside_output(1, oh)) continue;
                  for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                    const int64_t ow = g.source(2, iw, kw);
                    if (!inside_output(2, ow)) continue;
                    out_plane[(od * g.out[1] + oh) * g.out[2] + ow] +=
                        value *
                        static_cast<double>(kernel[(kd * g.kernel[1] + kh) * g.kernel[2] + kw]);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  T* dst = y.data<T>();
  for (int64_t i = 0; i < static_cast<int64_t>(sums.size()); ++i) {
    const int64_t m = (i / g.out_size()) % out_channels;
    dst[i] = static_cast<T>(sums[static_cast<size_t>(i)] +
                            (bias != nullptr ? static_cast<double>(bias[m]) : 0.0));
  }
}

}  // namespace

void conv(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  if (fused::has_depthwise(node)) {
    // The node's own convolution and activation, then the depthwise one it stands for too.
    const Tensor& w = inputs.at(1);
    Node own = node;
    own.attributes.erase("fused_depthwise");
    const Shape& x = inputs.at(0).shape();
    const spatial::Window window = spatial::read_window(own, 2, {w.shape()[2], w.shape()[3]});
    const spatial::Geometry g = spatial::forward_geometry(own, window, {x[2], x[3]});
    std::vector<Tensor> y{
        Tensor(inputs[0].element_type(), Shape{x[0], w.shape()[0], g.output[0], g.output[1]})};
    conv(own, {inputs[0], w, optional_input(inputs, 2)}, y);
    conv(fused::depthwise_node(node, w.shape()[0]), {y[0], inputs.at(3), inputs.at(4)}, outputs);
    return;
  }
  dispatch_float_or_double(node, inputs.at(0).element_type(), [&](auto tag) {
    using T = decltype(tag);
    conv_typed<T>(node, inputs.at(0), inputs.at(1), optional_input(inputs, 2), outputs.at(0));
  });
  apply_fused_post_ops(node, inputs, outputs.at(0));
}

void conv_transpose(const Node& node, const std::vector<Tensor>& inputs,
                    std::vector<Tensor>& outputs) {
  dispatch_float_or_double(node, inputs.at(0).element_type(), [&](auto tag) {
    using T = decltype(tag);
    conv_transpose_typed<T>(node, inputs.at(0), inputs.at(1), optional_input(inputs, 2),
                            outputs.at(0));
  });
}

void register_convolution(KernelRegistry& registry) {
  registry.add("reference", 0, "Conv", [](const KernelRequest& r) -> std::unique_ptr<Kernel> {
    if (r.inputs.empty() || !is_f32_or_f64(r.inputs[0].type)) return nullptr;
    return make_reference_kernel(r.node, &conv);
  });
  registry.add("reference", 0, "ConvTranspose",
               [](const KernelRequest& r) -> std::unique_ptr<Kernel> {
                 if (r.inputs.empty() || !is_f32_or_f64(r.inputs[0].type)) return nullptr;
                 return make_reference_kernel(r.node, &conv_transpose);
               });
}

}  // namespace troupe::kernels::reference
