// PRelu: y = x where x >= 0, slope * x elsewhere, the slope broadcast to x as ONNX allows. Three
// ways, the fastest that applies:
// - one constant slope (PyTorch's nn.PReLU() default): oneDNN's eltwise relu with that slope;
// - a slope per channel ([C,1,1] as nn.PReLU(C) exports): oneDNN's prelu primitive;
// - any other broadcast: the prelu primitive on the slope expanded to x's shape (its JIT kernels
//   take a slope per channel or one per element, and answer the rest with their reference).
// Like the other element-by-element kernels it keeps a 4-D activation in the model's layout
// between convolutions when the slope varies along channels at most.
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"

namespace troupe::kernels::onednn {

namespace {

// `slope` (dims padded to x's rank, each 1 or x's) repeated to x's dims.
Tensor expand(const Tensor& slope, const Dims& slope_dims, const Dims& x) {
  Tensor full(ElementType::f32, Shape(std::vector<int64_t>(x.begin(), x.end())));
  const float* in = slope.data<float>();
  float* out = full.data<float>();
  const size_t rank = x.size();
  // The slope's element step per unit of each axis of x (0 where it broadcasts).
  Dims step(rank, 0);
  int64_t stride = 1;
  for (size_t d = rank; d-- > 0;) {
    if (slope_dims[d] != 1) step[d] = stride;
    stride *= slope_dims[d];
  }
  Dims index(rank, 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < full.size(); ++i) {
    out[i] = in[offset];
    for (size_t d = rank; d-- > 0;) {
      offset += step[d];
      if (++index[d] < x[d]) break;
      offset -= step[d] * x[d];
      index[d] = 0;
    }
  }
  return full;
}

class PReluKernel final : public DnnlKernel {
 public:
  explicit PReluKernel(const KernelRequest& request) : DnnlKernel(request) {
    if (request.inputs.size() != 2 || present_outputs(request) != 1) throw Unsupported{};
    const Shape& x = request.inputs[0].shape;
    const Shape& slope = request.inputs[1].shape;
    if (slope.rank() > x.rank()) throw Unsupported{};
    // A slope constant across the spatial axes reads the same in any channel layout.
    bool per_channel = true;
    for (size_t d = 0; d < slope.rank(); ++d) {
      const size_t axis = x.rank() - slope.rank() + d;
      if (axis != 1 && slope[d] != 1) per_channel = false;
    }
    if (per_channel) lay_out_first_operand(request);
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const Dims x = to_dims(inputs[0]);
    const Dims slope = pad_front(to_dims(inputs[1]), x.size());
    if (x.size() > DNNL_MAX_NDIMS || slope.size() != x.size() || to_dims(outputs[0]) != x)
      return false;
    for (size_t d = 0; d < x.size(); ++d)
      if (slope[d] != 1 && slope[d] != x[d]) return false;
    const bool laid_out = !input_layout(0).is_plain() || !output_layout(0).is_plain();
    if (laid_out && (x.size() != 4 || input_layout(0).bf16 || output_layout(0).bf16)) return false;
    const dnnl::memory::desc src_md = tensor_desc(x, input_layout(0));
    const dnnl::memory::desc dst_md = tensor_desc(x, output_layout(0));
    expanded_ = Tensor();
    leaky_ = false;

    const Tensor* constant_slope = constant(1);
    if (constant_slope && constant_slope->size() == 1) {
      leaky_ = true;
      dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference,
                                       dnnl::algorithm::eltwise_relu, src_md,
                                       static_cast<float>(constant_slope->value_at(0)));
      dnnl::eltwise_forward::primitive_desc pd(desc, primitive_attributes(), cpu_engine());
      adopt(Primitive::of<dnnl::eltwise_forward>(pd), pd.src_desc(), pd.dst_desc(), dst_md);
      set_impl(pd);
      return true;
    }
    // The slope in the layout the primitive chooses (given plain, oneDNN answers a blocked
    // tensor with its reference kernel).
    auto make = [&](const Dims& slope_dims) {
      const dnnl::memory::desc any(slope_dims, dnnl::memory::data_type::f32,
                                   dnnl::memory::format_tag::any);
      dnnl::prelu_forward::desc desc(dnnl::prop_kind::forward_inference, src_md, any);
      return dnnl::prelu_forward::primitive_desc(desc, primitive_attributes(), cpu_engine());
    };
    dnnl::prelu_forward::primitive_desc pd = make(slope);
    expand_ = is_reference(pd) && slope != x;
    if (expand_) {
      pd = make(x);
      if (is_reference(pd)) return false;
      if (constant_slope) expanded_ = expand(constant_slope->contiguous(), slope, x);
    }
    slope_dims_ = slope;
    adopt(Primitive::of<dnnl::prelu_forward>(pd), pd.src_desc(), pd.dst_desc(), dst_md);
    slope_ = PackedWeights(plain_f32(expand_ ? x : slope), pd.weights_desc(),
                           expanded_.empty() ? constant_slope : &expanded_, stream_);
    set_impl(pd);
    return true;
  }

  const PackedWeights* packed_weights(size_t i) const override {
    // A slope expanded from the constant is packed from the expansion, not the constant.
    return i == 1 && !leaky_ && !expand_ ? &slope_ : nullptr;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    bind(src_, inputs[0]);
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, src_},
                                                  {DNNL_ARG_DST, dst_.output_memory(outputs[0])}};
    if (!leaky_) {
      // A slope given at run time and broadcast another way is expanded on every run.
      const Tensor slope = !expand_ ? inputs[1]
                           : expanded_.empty()
                               ? expand(inputs[1], slope_dims_, to_dims(inputs[0].shape()))
                               : expanded_;
      args[DNNL_ARG_WEIGHTS] = slope_.get(slope, stream_);
      primitive_.execute(stream_, args);
      stream_.wait();  // the run-time expansion lives until here
    } else {
      primitive_.execute(stream_, args);
    }
    dst_.from_internal(outputs[0], stream_);
  }

 private:
  // The primitive reads x's layout and writes it; another output layout is reordered into.
  void adopt(Primitive primitive, const dnnl::memory::desc& src, const dnnl::memory::desc& dst,
             const dnnl::memory::desc& output) {
    primitive_ = std::move(primitive);
    src_ = unbound_memory(src);
    dst_ = LayoutBridge(output, dst, 1);
  }

  Primitive primitive_;
  dnnl::memory src_;
  LayoutBridge dst_;
  bool leaky_ = false;   // one constant slope: an eltwise relu with it
  bool expand_ = false;  // the slope expanded to x's shape
  Dims slope_dims_;
  Tensor expanded_;      // the constant slope expanded
  PackedWeights slope_;  // a constant slope is reordered once
};

}  // namespace

void register_prelu(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "PRelu", make_kernel<PReluKernel>);
}

}  // namespace troupe::kernels::onednn
