// Two-input element-wise ops on oneDNN's binary primitive. oneDNN broadcasts only its second
// source, so a broadcast first operand is swapped into that place for commutative ops; where both
// operands are broadcast (RAFT's [N,1,1,2] + [1,7,7,2] coordinate grids) or Sub/Div's left one
// is, the op runs as rows (below), each operand indexed through its own broadcast strides.
// oneDNN 2.6's JIT kernels broadcast the second source only as a scalar or along some axes; for
// other patterns it picks its reference kernel (a Swin transformer's shifted-window mask,
// [1,64,3,49,49] + [1,64,1,49,49], took 23 ms there). The op then runs as rows: the
// innermost axes where both operands are full (or the second is one scalar) are one contiguous
// loop, the outer ones index the second operand through its broadcast strides.
// Between convolutions a 4-D op runs in the model's activation layout, so that a
// squeeze-and-excitation block's Mul(x, s) (x [N,C,H,W], s [N,C,1,1], EfficientNet, MobileNetV3,
// RegNetY) and everything else that reads x keep it blocked instead of reordering it to plain and
// back (EfficientNet-B0 on one AVX-512 core: 13.4 -> 11.1 ms, its depthwise convolutions then
// running jit_dw on nChw16c instead of brdgmm_dw between reorders).
#include <vector>

#include "kernels/dnnl/broadcast_rows.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/reference/common.hpp"

namespace troupe::kernels::onednn {

namespace {

struct BinaryOp {
  dnnl::algorithm algorithm;
  bool commutative;
};

BinaryOp choose_op(const std::string& op) {
  using alg = dnnl::algorithm;
  if (op == "Add") return {alg::binary_add, true};
  if (op == "Sub") return {alg::binary_sub, false};
  if (op == "Mul") return {alg::binary_mul, true};
  if (op == "Div") return {alg::binary_div, false};
  if (op == "Max") return {alg::binary_max, true};
  if (op == "Min") return {alg::binary_min, true};
  throw Unsupported{};
}

// Up to this many output elements a plain op runs as rows (below) rather than as a oneDNN
// primitive, whose execution costs ~2.5 us whatever the size (argument maps, its execution
// context): a chain of 100 Adds and Muls of 4096 elements took 0.17 ms as primitives and 0.11 as
// rows, of 65536 elements 1.00 and 0.86 ms (Zen 4, one thread). Below it a node stays on one
// thread anyway (engine/graph/thread_policy.cpp), where the rows never split.
constexpr int64_t rows_up_to_elements = 16384;
// Runs of at least this many output elements sharing one value of an operand are computed as
// rows whatever the size (below).
constexpr int64_t long_run = 256;

class BinaryKernel final : public DnnlKernel {
 public:
  explicit BinaryKernel(const KernelRequest& request)
      : DnnlKernel(request), op_(choose_op(request.node.op_type)) {
    // Max and Min are variadic in ONNX; only their two-input form maps onto one primitive.
    if (request.inputs.size() != 2 || !has_input(0) || !has_input(1)) throw Unsupported{};
    const Shape& out = request.outputs[0].shape;
    // 2-D and 1-D activations (the residual sums of CNNs and temporal convolution networks).
    if (out.rank() >= 3 && out.rank() <= 5 && out.is_static() &&
        request.outputs[0].type == ElementType::f32) {
      for (size_t i = 0; i < 2; ++i)
        full_size_[i] =
            request.inputs[i].shape == out && request.inputs[i].type == ElementType::f32;
      const Shape& other = request.inputs[full_size_[0] ? 1 : 0].shape;
      lays_out_ = (full_size_[0] || full_size_[1]) &&
                  ((full_size_[0] && full_size_[1]) || is_per_channel(other, out));
    }
  }

  // In a bf16 graph a laid-out op reads and writes bf16 where its neighbours do (a
  // squeeze-and-excitation product or a residual sum between bf16 convolutions).
  TensorLayout preferred_input_layout(size_t i) const override {
    return lays_out_ && i < 2 && full_size_[i] ? stored_layout(activation_layout())
                                               : TensorLayout{};
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    return lays_out_ && o == 0 ? stored_layout(activation_layout()) : TensorLayout{};
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    Dims dst = to_dims(outputs[0]);
    Dims a = pad_front(to_dims(inputs[0]), dst.size());
    Dims b = pad_front(to_dims(inputs[1]), dst.size());
    if (a.size() != dst.size() || b.size() != dst.size()) return false;
    for (size_t i = 0; i < dst.size(); ++i)
      if ((a[i] != dst[i] && a[i] != 1) || (b[i] != dst[i] && b[i] != 1)) return false;
    swapped_ = false;
    const bool plain =
        output_layout(0).is_plain() && input_layout(0).is_plain() && input_layout(1).is_plain();
    int64_t elements = 1;
    for (int64_t d : dst) elements *= d;
    if (plain && elements <= rows_up_to_elements) return plan_rows(dst, a, b);
    if (plain) {
      // One value of an operand for each long run of the output ([N, C, H, W] - [N, C, 1, 1],
      // plain: a Performer's stabiliser, x - max over the last two axes): oneDNN's plain kernel
      // took 1.8 ns an element for that broadcast (273 us for 156k, Zen 5), the rows one
      // vectorised loop per run.
      if (rows_plan_.plan(dst, a, b) && (rows_plan_.a_scalar() || rows_plan_.b_scalar()) &&
          rows_plan_.inner() >= long_run)
        return use_rows();
    }
    if (a != dst) {
      // Neither operand is the output's size, or the left one of Sub/Div is broadcast.
      if (!op_.commutative || b != dst) return plain && plan_rows(dst, a, b);
      std::swap(a, b);
      swapped_ = true;
    }
    // The primitive computes in dst's layout. A full-size operand in another one (a value some
    // plain-only kernel also reads) is reordered into it. A per-channel operand [N or 1, C, 1, 1]
    // has the same bytes plain as in the channel layouts (the graph compiler lays out only tensors
    // whose C the block divides): it is described in dst's layout, from which oneDNN broadcasts.
    const TensorLayout dst_layout = output_layout(0);
    const bool laid_out = !dst_layout.is_plain();
    if (laid_out && b != dst && !is_per_channel(Shape(b), Shape(dst))) return false;
    const TensorLayout a_layout = input_layout(swapped_ ? 1 : 0);
    const TensorLayout b_layout = input_layout(swapped_ ? 0 : 1);
    // Operands stored as bf16 are read as bf16 and a bf16 output written so; where oneDNN has no
    // JIT kernel for those types (create_in), everything is computed in f32 and converted.
    const auto f32 = dnnl::memory::data_type::f32;
    const bool any_bf16 = a_layout.bf16 || (b == dst && b_layout.bf16) || dst_layout.bf16;
    auto make = [&](dnnl::memory::data_type type) {
      const auto stored = [&](bool bf16) { return bf16 ? type : f32; };
      const TensorLayout order = dst_layout.order();
      const dnnl::memory::desc b_md = laid_out || b == dst
                                          ? tensor_desc(b, order, stored(b == dst && b_layout.bf16))
                                          : plain_f32(b);
      dnnl::binary::desc desc(op_.algorithm, tensor_desc(a, order, stored(a_layout.bf16)), b_md,
                              tensor_desc(dst, order, stored(dst_layout.bf16)));
      return dnnl::binary::primitive_desc(desc, primitive_attributes(), cpu_engine());
    };
    const dnnl::binary::primitive_desc pd =
        create_in(any_bf16 ? dnnl::memory::data_type::bf16 : f32, make, true);
    rows_ = false;
    if (is_reference(pd)) {
      // oneDNN answers layouts its JIT kernels decline with its reference kernel: then plain.
      // The rows read plain tensors only.
      if (laid_out || !plain) return false;
      if (swapped_) std::swap(a, b);
      swapped_ = false;
      return plan_rows(dst, a, b);
    }
    primitive_ = Primitive::of<dnnl::binary>(pd);
    src0_ = LayoutBridge(tensor_desc(a, a_layout), pd.src_desc(0), 0);
    src1_ = b == dst ? LayoutBridge(tensor_desc(b, b_layout), pd.src_desc(1), 2)
                     : LayoutBridge(pd.src_desc(1), pd.src_desc(1), 2);
    dst_ = LayoutBridge(tensor_desc(dst, dst_layout), pd.dst_desc(), 1);
    set_impl(pd);
    return true;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    if (rows_) {
      run_rows(inputs[0].data<float>(), inputs[1].data<float>(), outputs[0].data<float>());
      return;
    }
    primitive_.execute(stream_,
                       {{DNNL_ARG_SRC_0, src0_.to_internal(inputs[swapped_ ? 1 : 0], stream_)},
                        {DNNL_ARG_SRC_1, src1_.to_internal(inputs[swapped_ ? 0 : 1], stream_)},
                        {DNNL_ARG_DST, dst_.output_memory(outputs[0])}});
    dst_.from_internal(outputs[0], stream_);
  }

 private:
  // [N or 1, C, 1, 1] against a 4-D output of C channels ([N or 1, C, 1] against a 3-D one).
  static bool is_per_channel(const Shape& s, const Shape& out) {
    if (s.rank() != out.rank()) return false;
    for (size_t d = 2; d < s.rank(); ++d)
      if (s[d] != 1) return false;
    return (s[0] == 1 || s[0] == out[0]) && s[1] == out[1];
  }

  // The row plan for dst dims `dst` and operand dims `a`, `b` (each equal or 1).
  bool plan_rows(const Dims& dst, const Dims& a, const Dims& b) {
    return rows_plan_.plan(dst, a, b) && use_rows();
  }

  // Runs as rows_plan_ plans it.
  bool use_rows() {
    rows_ = true;
    set_impl("broadcast_rows");
    return true;
  }

  template <class Op>
  void rows(const float* a, const float* b, float* y, Op op) const {
    compute_rows(rows_plan_, a, b, y, op);
  }

  void run_rows(const float* a, const float* b, float* y) const {
    using alg = dnnl::algorithm;
    switch (op_.algorithm) {
      case alg::binary_add:
        return rows(a, b, y, [](float u, float v) { return u + v; });
      case alg::binary_sub:
        return rows(a, b, y, [](float u, float v) { return u - v; });
      case alg::binary_mul:
        return rows(a, b, y, [](float u, float v) { return u * v; });
      case alg::binary_div:
        return rows(a, b, y, [](float u, float v) { return u / v; });
      // NaN as the reference kernels (numpy's maximum and minimum).
      case alg::binary_max:
        return rows(a, b, y, [](float u, float v) { return reference::max_of(u, v); });
      default:
        return rows(a, b, y, [](float u, float v) { return reference::min_of(u, v); });
    }
  }

  BinaryOp op_;
  bool rows_ = false;  // computed by run_rows, not a primitive
  BroadcastRows rows_plan_;
  bool full_size_[2] = {false, false};
  bool lays_out_ = false;  // may read and write the activation layout (above)
  bool swapped_ = false;
  Primitive primitive_;
  LayoutBridge src0_;
  LayoutBridge src1_;
  LayoutBridge dst_;
};

}  // namespace

void register_binary(KernelRegistry& registry) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"})
    registry.add(backend_name, backend_priority, op,
                 [](const KernelRequest& request) -> std::unique_ptr<Kernel> {
                   if (auto f32 = make_kernel<BinaryKernel>(request)) return f32;
                   return make_integer_arithmetic(request);
                 });
}

}  // namespace troupe::kernels::onednn
