// MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool (1-D to 3-D) on oneDNN's dilated
// pooling primitive (pooling_v2); max pooling also of the u8/i8 activations of quantized models
// (kept channels-last, as the int8 convolutions keep them).
#include "engine/ops/spatial.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/max_pool_indices.hpp"

namespace troupe::kernels::onednn {

namespace {

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
