// Two-input element-wise ops on oneDNN's binary primitive. oneDNN broadcasts only its second
// source, so a broadcast first operand is swapped into that place for commutative ops; other
// cases (Sub/Div with a broadcast left side) stay with the reference kernel.
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"

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

class BinaryKernel final : public DnnlKernel {
 public:
  explicit BinaryKernel(const KernelRequest& request)
      : DnnlKernel(request), op_(choose_op(request.node.op_type)) {
    // Max and Min are variadic in ONNX; only their two-input form maps onto one primitive.
    if (request.inputs.size() != 2 || !has_input(0) || !has_input(1)) throw Unsupported{};
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    Dims dst = to_dims(outputs[0]);
    Dims a = pad_front(to_dims(inputs[0]), dst.size());
    Dims b = pad_front(to_dims(inputs[1]), dst.size());
    if (a.size() != dst.size() || b.size() != dst.size()) return false;
    swapped_ = false;
    if (a != dst) {
      if (!op_.commutative || b != dst) return false;
      std::swap(a, b);
      swapped_ = true;
    }
    for (size_t i = 0; i < dst.size(); ++i)
      if (b[i] != dst[i] && b[i] != 1) return false;
    dnnl::memory::desc a_md = plain_f32(a);
    dnnl::memory::desc b_md = plain_f32(b);
    dnnl::memory::desc dst_md = plain_f32(dst);
    dnnl::binary::desc desc(op_.algorithm, a_md, b_md, dst_md);
    dnnl::binary::primitive_desc pd(desc, primitive_attributes(), cpu_engine());
    primitive_ = Primitive::of<dnnl::binary>(pd);
    src0_ = unbound_memory(a_md);
    src1_ = unbound_memory(b_md);
    dst_ = unbound_memory(dst_md);
    args_ = {{DNNL_ARG_SRC_0, src0_}, {DNNL_ARG_SRC_1, src1_}, {DNNL_ARG_DST, dst_}};
    set_impl(pd);
    return true;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    bind(src0_, inputs[swapped_ ? 1 : 0]);
    bind(src1_, inputs[swapped_ ? 0 : 1]);
    bind(dst_, outputs[0]);
    primitive_.execute(stream_, args_);
  }

 private:
  BinaryOp op_;
  bool swapped_ = false;
  Primitive primitive_;
  dnnl::memory src0_;
  dnnl::memory src1_;
  dnnl::memory dst_;
  std::unordered_map<int, dnnl::memory> args_;
};

}  // namespace

void register_binary(KernelRegistry& registry) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"})
    registry.add(backend_name, backend_priority, op, make_kernel<BinaryKernel>);
}

}  // namespace troupe::kernels::onednn
