// MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool (1-D to 3-D) on oneDNN's dilated
// pooling primitive (pooling_v2); max pooling also of the u8/i8 activations of quantized models
// (kept channels-last, as the int8 convolutions keep them). Global pooling of f32 in the blocked
// or channels-last layout runs troupe's loop instead: oneDNN's kernel walks a window as large as
// the image one position at a time (PointNet's max over 1024 points of 1024 channels: 130 us,
// against 42 for the plain reduction; the loop is as fast as the reduction).
#include <algorithm>
#include <cstring>

#include "engine/ops/spatial.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/max_pool_indices.hpp"
#include "kernels/dnnl/team.hpp"
#include "kernels/dnnl/vector_exp.hpp"  // TROUPE_ISA_CLONES

namespace troupe::kernels::onednn {

namespace {

// y[l] = the maximum (or mean) over s < positions of x[s * stride + l], l < W (8 or 16), in
// GCC vectors of W lanes (one AVX-512 register for 16, two AVX2 ones): four positions at a time
// into four accumulators, so that the maxima or sums are not one chain of dependent ops. (Loops
// over the lanes were not vectorized, the select of a maximum being no plain min/max to GCC: 6x
// slower.)
template <int W>
TROUPE_ISA_CLONES void pool_lanes(const float* x, float* y, int64_t positions, int64_t stride,
                                  bool max) {
  typedef float Lanes __attribute__((vector_size(W * sizeof(float))));
  Lanes acc[4];
  std::memcpy(&acc[0], x, sizeof(Lanes));
  for (int k = 1; k < 4; ++k) acc[k] = max ? acc[0] : Lanes{};
  int64_t s = 1;
  for (; s + 4 <= positions; s += 4)
    for (int k = 0; k < 4; ++k) {
      Lanes row;
      std::memcpy(&row, x + (s + k) * stride, sizeof row);
      acc[k] = max ? (row > acc[k] ? row : acc[k]) : acc[k] + row;
    }
  for (; s < positions; ++s) {
    Lanes row;
    std::memcpy(&row, x + s * stride, sizeof row);
    acc[0] = max ? (row > acc[0] ? row : acc[0]) : acc[0] + row;
  }
  for (int k = 1; k < 4; ++k) acc[0] = max ? (acc[k] > acc[0] ? acc[k] : acc[0]) : acc[0] + acc[k];
  if (!max) acc[0] *= 1.f / static_cast<float>(positions);
  std::memcpy(y, &acc[0], sizeof(Lanes));
}

// The same for one lane (the rest of a channels-last row after its groups of 16).
inline void pool_lane(const float* x, float* y, int64_t positions, int64_t stride, bool max) {
  float acc = x[0];
  for (int64_t s = 1; s < positions; ++s) {
    const float v = x[s * stride];
    acc = max ? (v > acc ? v : acc) : acc + v;
  }
  *y = max ? acc : acc / static_cast<float>(positions);
}

class PoolingKernel final : public SrcDstKernel {
 public:
  explicit PoolingKernel(const KernelRequest& request) : SrcDstKernel(request) {
    const std::string& op = request.node.op_type;
    global_ = op == "GlobalAveragePool" || op == "GlobalMaxPool";
    max_ = op == "MaxPool" || op == "GlobalMaxPool";
    // MaxPool's optional Indices output has no oneDNN counterpart (max_pool_indices.cpp).
    if (present_outputs(request) != 1 || request.inputs.empty()) throw Unsupported{};
    type_ = *to_dnnl(request.inputs[0].type);
    int8_ = type_ != dnnl::memory::data_type::f32;
    const size_t rank = request.inputs[0].shape.rank();
    if (rank < 3 || rank > 5) throw Unsupported{};
    if (!global_) {
      window_ = spatial::read_window(request.node, rank - 2);
      count_include_pad_ = request.node.attributes.get_int_or("count_include_pad", 0) != 0;
    }
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const Dims src = to_dims(inputs[0]);
    const Dims dst = to_dims(outputs[0]);
    if (src.size() < 3 || src.size() > 5 || dst.size() != src.size()) return false;
    const size_t n = src.size() - 2;
    Dims kernel(n), strides(n, 1), dilation(n, 0), pad_l(n, 0), pad_r(n, 0);
    if (global_) {
      for (size_t i = 0; i < n; ++i) kernel[i] = src[2 + i];
    } else {
      const spatial::Geometry g =
          spatial::forward_geometry(node_, window_, spatial::spatial_dims(inputs[0]));
      for (size_t i = 0; i < n; ++i) {
        if (g.output[i] != dst[2 + i]) return false;
        kernel[i] = window_.kernel[i];
        strides[i] = window_.strides[i];
        dilation[i] = window_.dilations[i] - 1;  // oneDNN counts dilation from 0
        pad_l[i] = g.pads_begin[i];
        // oneDNN wants the end padding that yields exactly the output size: less than given when
        // the last window stops short, more when ceil_mode lets it run past the padding.
        const int64_t extent = spatial::dilated_extent(kernel[i], window_.dilations[i]);
        pad_r[i] = (dst[2 + i] - 1) * strides[i] + extent - src[2 + i] - pad_l[i];
        // Averages that count padding would divide by cells ONNX does not count.
        if (!max_ && count_include_pad_ && pad_r[i] > g.pads_end[i]) return false;
      }
    }
    // Global pooling where a position's channels (channels-last) or a block's lanes (blocked)
    // are contiguous, in f32: troupe's loop over whole rows of lanes. Its output, one position
    // of whole channel blocks, is the same memory in every f32 order.
    const TensorLayout in_layout = input_layout(0);
    lanes_loop_ = global_ && !int8_ && !in_layout.bf16 && !output_layout(0).bf16 &&
                  (in_layout.channels_last ||
                   (in_layout.channel_block > 0 && src[1] % in_layout.channel_block == 0));
    if (lanes_loop_) {
      int64_t positions = 1;
      for (size_t i = 2; i < src.size(); ++i) positions *= src[i];
      positions_ = positions;
      // Per image: channels-last, one row of C lanes per position; blocked, C / block planes of
      // positions x block lanes.
      lanes_ = in_layout.channels_last ? src[1] : in_layout.channel_block;
      planes_ = src[0] * (in_layout.channels_last ? 1 : src[1] / in_layout.channel_block);
      set_impl(max_ ? "global_max_rows" : "global_mean_rows");
      return true;
    }
    dnnl::algorithm algorithm = max_                 ? dnnl::algorithm::pooling_max
                                : count_include_pad_ ? dnnl::algorithm::pooling_avg_include_padding
                                                     : dnnl::algorithm::pooling_avg_exclude_padding;
    // Pooling runs in the layout of its source; plain tensors are pooled in the blocked layout
    // too (the reorders cost less than oneDNN's plain-layout pooling, which is not vectorized).
    // A destination in another layout than the primitive's is reordered after it.
    // A source stored as bf16 is pooled in bf16 (oneDNN pools bf16 into bf16), where oneDNN can.
    const dnnl::memory::desc src_md = tensor_desc(src, input_layout(0), type_);
    const dnnl::memory::desc dst_md = tensor_desc(dst, output_layout(0), type_);
    auto make = [&](dnnl::memory::data_type type) {
      const TensorLayout internal = layout();
      dnnl::pooling_v2_forward::desc desc(
          dnnl::prop_kind::forward_inference, algorithm, tensor_desc(src, internal, type),
          tensor_desc(dst, internal, type), strides, kernel, dilation, pad_l, pad_r);
      return dnnl::pooling_v2_forward::primitive_desc(desc, primitive_attributes(), cpu_engine());
    };
    return adopt<dnnl::pooling_v2_forward>(
        input_layout(0).bf16 ? create_in(dnnl::memory::data_type::bf16, make, true) : make(type_),
        src_md, dst_md);
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    if (!lanes_loop_) return SrcDstKernel::run(inputs, outputs);
    const float* x = inputs[0].data<float>();
    float* y = outputs[0].data<float>();
    // Parts of 16 lanes (a block of AVX-512's, two of AVX2's; channels-last rows are cut into
    // them), the rest of a row one lane at a time.
    const int64_t planes = planes_, positions = positions_, lanes = lanes_;
    const int64_t parts = (lanes + 15) / 16;
    const bool max = max_;
    for_each_index_if(planes * parts > 1 && planes * positions * lanes >= 32768, planes * parts,
                      [&](int64_t i) {
                        const int64_t plane = i / parts, first = (i % parts) * 16;
                        const float* from = x + plane * positions * lanes + first;
                        float* to = y + plane * lanes + first;
                        if (lanes - first >= 16)
                          return pool_lanes<16>(from, to, positions, lanes, max);
                        int64_t l = 0;
                        if (lanes - first >= 8) {
                          pool_lanes<8>(from, to, positions, lanes, max);
                          l = 8;
                        }
                        for (; l < lanes - first; ++l)
                          pool_lane(from + l, to + l, positions, lanes, max);
                      });
  }

 public:
  // In a bf16 graph it reads and writes bf16 where its neighbours do (layout_assignment), so the
  // activations between bf16 convolutions stay bf16 through the pooling.
  TensorLayout preferred_input_layout(size_t i) const override {
    return i == 0 ? layout() : TensorLayout{};
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    return o == 0 ? layout() : TensorLayout{};
  }

 private:
  TensorLayout layout() const {
    return int8_ ? TensorLayout::channels_last_order() : stored_layout(activation_layout());
  }

  dnnl::memory::data_type type_ = dnnl::memory::data_type::f32;
  bool int8_ = false;
  bool global_ = false;
  bool max_ = false;
  spatial::Window window_;
  bool count_include_pad_ = false;
  // Global pooling by pool_lanes: planes x positions x lanes in, planes x lanes out.
  bool lanes_loop_ = false;
  int64_t planes_ = 0, positions_ = 0, lanes_ = 0;
};

// f32 pooling, or max pooling of u8/i8 into the same type.
std::unique_ptr<Kernel> make_pooling_kernel(const KernelRequest& request) {
  if (request.node.op_type == "MaxPool")
    if (auto with_indices = make_max_pool_indices(request)) return with_indices;
  if (all_f32(request)) return create_kernel<PoolingKernel>(request);
  const std::string& op = request.node.op_type;
  const bool max = op == "MaxPool" || op == "GlobalMaxPool";
  if (!max || request.inputs.empty() || request.outputs.empty()) return nullptr;
  const ElementType type = request.inputs[0].type;
  if ((type != ElementType::u8 && type != ElementType::i8) || request.outputs[0].type != type)
    return nullptr;
  return create_kernel<PoolingKernel>(request);
}

}  // namespace

void register_pooling(KernelRegistry& registry) {
  for (const char* op : {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"})
    registry.add(backend_name, backend_priority, op, make_pooling_kernel);
}

}  // namespace troupe::kernels::onednn
