// MaxPool with its Indices output, and MaxUnpool, which reads them (SegNet's and ENet's
// decoders), on plain f32 tensors with troupe's own loops: oneDNN's pooling has no indices
// output, and the reference kernels' per-tap visitors and per-element index arithmetic made them
// 38-43% of an ENet's op time (MaxPool 24 ms, MaxUnpool 9.6 ms; ONNX Runtime 9.5 and 0.7 ms).
// A dilated MaxPool without Indices runs on the same loops: oneDNN 2.6 answers dilated max
// pooling with its reference kernel (1.2 ms on [1, 16, 28, 21], torch 83 us).
// Planes are spread over the stream's threads.
#include "kernels/dnnl/max_pool_indices.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/team.hpp"
#include "kernels/reference/pooling.hpp"
#include "kernels/reference/window3d.hpp"

namespace troupe::kernels::onednn {

namespace {

bool plain_f32_input(const KernelRequest& r, size_t input) {
  return input < r.inputs.size() && r.inputs[input].type == ElementType::f32 &&
         r.input_layout(input).is_plain();
}

// Y[n, c, o] = the largest X[n, c, window(o)] (the first in row-major order on ties, NaN where
// the first tap is NaN, as the reference kernel); Indices its flat index in X, the spatial part
// row-major (storage_order 0) or column-major (1).
class MaxPoolIndicesKernel final : public Kernel {
 public:
  explicit MaxPoolIndicesKernel(const KernelRequest& r)
      : node_(r.node), column_major_(r.node.attributes.get_int_or("storage_order", 0) != 0) {
    const size_t rank = r.inputs.empty() ? 0 : r.inputs[0].shape.rank();
    with_indices_ = r.outputs.size() == 2 && r.outputs[1].type == ElementType::i64;
    const std::vector<int64_t> dilations = r.node.attributes.get_ints_or("dilations", {});
    const bool dilated =
        std::any_of(dilations.begin(), dilations.end(), [](int64_t d) { return d > 1; });
    if ((!with_indices_ && !(r.outputs.size() == 1 && dilated)) || !plain_f32_input(r, 0) ||
        r.outputs[0].type != ElementType::f32 || !r.output_layout(0).is_plain() || rank < 3 ||
        rank > 5)
      throw Unsupported{};
  }

  std::string implementation() const override {
    return with_indices_ ? "dnnl:max_pool_indices" : "dnnl:max_pool_dilated";
  }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const Tensor x = in[0].contiguous();
    const Shape& shape = x.shape();
    const reference::Window3d g = reference::pooling_window(node_, x, out[0]);
    if (with_indices_) reference::check_output_shape(node_, out[1], out[0].shape().dims());
    const int64_t planes = shape[0] * shape[1];
    const int64_t in_size = g.in_size(), out_size = g.out_size();
    const float* src = x.data<float>();
    float* dst = out[0].data<float>();
    int64_t* indices = with_indices_ ? out[1].data<int64_t>() : nullptr;
    const bool split = planes > 1 && planes * out_size * g.kernel_size() > (int64_t{1} << 15);
    // The taps in range of each output position, per axis (a division or two each: once here,
    // not once per output).
    for (int axis = 0; axis < 3; ++axis) taps_[axis] = g.tap_ranges(axis);
    // A window of one element at stride 1 (PyTorch's export adds such a MaxPool to compute the
    // indices of another's output in its input): Y is X, each index its own position.
    bool identity = !column_major_;
    for (int axis = 0; axis < 3; ++axis)
      identity = identity && g.kernel[axis] == 1 && g.stride[axis] == 1 && g.pad_begin[axis] == 0 &&
                 g.out[axis] == g.in[axis];
    if (identity && with_indices_) {
      for_each_index_if(split, planes, [&](int64_t p) {
        std::copy_n(src + p * in_size, in_size, dst + p * in_size);
        int64_t* index = indices + p * in_size;
        for (int64_t e = 0; e < in_size; ++e) index[e] = p * in_size + e;
      });
      return;
    }
    for_each_index_if(split, planes, [&](int64_t p) {
      // Without an Indices output the loops write theirs into a buffer of the thread's own.
      thread_local std::vector<int64_t> unused;
      if (!indices) unused.resize(static_cast<size_t>(out_size));
      pool_plane(g, src + p * in_size, p * in_size, dst + p * out_size,
                 indices ? indices + p * out_size : unused.data());
    });
  }

 private:
  // Locals and restrict pointers throughout: the i64 indices written would otherwise alias the
  // window's and the tap ranges' i64 values, reloaded after every store.
  void pool_plane(const reference::Window3d g, const float* __restrict plane, int64_t first,
                  float* __restrict y, int64_t* __restrict index) const {
    const int64_t* __restrict d_taps = taps_[0].data();
    const int64_t* __restrict h_taps = taps_[1].data();
    const int64_t* __restrict w_taps = taps_[2].data();
    const int64_t in_h = g.in[1], in_w = g.in[2];
    const int64_t stride_w = g.stride[2], dilation_w = g.dilation[2], pad_w = g.pad_begin[2];
    const int64_t out_w = g.out[2];
    const bool column_major = column_major_;
    for (int64_t od = 0; od < g.out[0]; ++od) {
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        for (int64_t ow = 0; ow < out_w; ++ow) {
          const int64_t w_lo = w_taps[2 * ow], w_hi = w_taps[2 * ow + 1];
          const int64_t w_first = ow * stride_w - pad_w + w_lo * dilation_w;
          // Branch-free over the taps (a comparison of random values mispredicts half the
          // time): the first tap in range starts the maximum, a later one replaces it only when
          // larger, so ties and a NaN first keep the first, as in the reference.
          int64_t at = -1;
          float best = 0.f;
          for (int64_t kd = d_taps[2 * od]; kd < d_taps[2 * od + 1]; ++kd) {
            const int64_t id = g.source(0, od, kd);
            for (int64_t kh = h_taps[2 * oh]; kh < h_taps[2 * oh + 1]; ++kh) {
              const int64_t start = (id * in_h + g.source(1, oh, kh)) * in_w + w_first;
              int64_t t = 0;
              if (at < 0 && w_lo < w_hi) {
                at = start;
                best = plane[at];
                t = 1;
              }
              for (; t < w_hi - w_lo; ++t) {
                const int64_t offset = start + t * dilation_w;
                const float value = plane[offset];
                const bool larger = value > best;
                best = larger ? value : best;
                at = larger ? offset : at;
              }
            }
          }
          const bool found = at >= 0;
          if (!found) at = 0;
          if (found && column_major) {
            const int64_t iw = at % in_w, ih = at / in_w % in_h, id = at / in_w / in_h;
            at = id + (ih + iw * in_h) * g.in[0];
          }
          *y++ = found ? best : -std::numeric_limits<float>::infinity();
          *index++ = first + at;
        }
      }
    }
  }

  std::vector<int64_t> taps_[3];  // per axis, [lo, hi) of each output position
  Node node_;
  bool column_major_;
  bool with_indices_ = true;  // else a dilated MaxPool's Y alone
};

// Y = zeros with each X value written at its index. Where Y is exactly the unpooled tensor (no
// larger output_shape) an index is Y's flat offset: each plane's values are written by one
// thread, provided its indices stay in its plane (MaxPool's do); otherwise, and for a larger
// output, the reference kernel computes it (it also names an index out of range).
class MaxUnpoolKernel final : public Kernel {
 public:
  explicit MaxUnpoolKernel(const KernelRequest& r) : node_(r.node) {
    if (r.inputs.size() < 2 || r.outputs.size() != 1 || !plain_f32_input(r, 0) ||
        r.inputs[1].type != ElementType::i64 || !r.input_layout(1).is_plain() ||
        r.outputs[0].type != ElementType::f32 || !r.output_layout(0).is_plain() ||
        r.inputs[0].shape.rank() < 3)
      throw Unsupported{};
  }

  std::string implementation() const override { return "dnnl:max_unpool"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const Tensor x = in[0].contiguous();
    const Tensor indices = in[1].contiguous();
    const bool has_output_shape = in.size() > 2 && !in[2].empty();
    // An index is Y's flat offset where Y is the unpooled tensor itself.
    const bool direct =
        indices.shape() == x.shape() &&
        out[0].shape().dims() == reference::unpooled_dims(node_, x.shape(), has_output_shape);
    if (direct && scatter_by_plane(x, indices, out[0])) return;
    reference::max_unpool(node_, in, out);
  }

 private:
  // False when some index leaves its plane (then nothing is promised about y).
  static bool scatter_by_plane(const Tensor& x, const Tensor& indices, Tensor& y) {
    const int64_t planes = x.shape()[0] * x.shape()[1];
    const int64_t in_size = planes == 0 ? 0 : x.size() / planes;
    const int64_t out_size = planes == 0 ? 0 : y.size() / planes;
    const float* src = x.data<float>();
    const int64_t* index = indices.data<int64_t>();
    float* dst = y.data<float>();
    std::atomic<bool> inside{true};
    for_each_index_if(planes > 1 && y.size() > (int64_t{1} << 16), planes, [&](int64_t p) {
      float* plane = dst + p * out_size;
      std::fill(plane, plane + out_size, 0.f);
      const int64_t first = p * out_size;
      for (int64_t k = p * in_size; k < (p + 1) * in_size; ++k) {
        const int64_t at = index[k] - first;
        if (at < 0 || at >= out_size) {
          inside.store(false, std::memory_order_relaxed);
          return;
        }
        plane[at] = src[k];
      }
    });
    return inside.load();
  }

  Node node_;
};

}  // namespace

std::unique_ptr<Kernel> make_max_pool_indices(const KernelRequest& request) {
  return construct_kernel<MaxPoolIndicesKernel>(request);
}

void register_max_unpool(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "MaxUnpool", construct_kernel<MaxUnpoolKernel>);
}

}  // namespace troupe::kernels::onednn
