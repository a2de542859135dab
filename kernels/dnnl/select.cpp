// Where as rows of a select: the output's innermost (merged) axis is one contiguous run, and each
// operand either runs along it or is broadcast over it, so the inner loop is a branch-free select
// the compiler vectorizes, with the outer offsets counted once per row. The reference walks every
// element through a broadcast index (about 7.5 ns per element: a GPT decoder's causal masks were
// 8% of its int8 inference on Zen 4). Any element type, by its size; plain tensors.
#include <omp.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/team.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

constexpr size_t operands = 3;  // condition, X, Y

// Element strides of each operand over the output's axes (0 where it is broadcast), the axes
// merged wherever every operand stores two of them as one run.
struct SelectPlan {
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, operands> strides;
};

SelectPlan plan_select(const std::vector<Tensor>& in, const Shape& out) {
  SelectPlan plan;
  const size_t rank = out.rank();
  std::array<std::vector<int64_t>, operands> full;
  for (size_t k = 0; k < operands; ++k) {
    const std::vector<int64_t>& dims = in[k].shape().dims();
    full[k].assign(rank, 0);
    int64_t stride = 1;
    for (size_t d = dims.size(); d-- > 0;) {
      const size_t axis = rank - dims.size() + d;
      if (dims[d] != 1) full[k][axis] = stride;
      stride *= dims[d];
    }
  }
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;
    bool merges = !plan.dims.empty();
    for (size_t k = 0; merges && k < operands; ++k)
      merges = plan.strides[k].back() == full[k][d] * out[d];
    if (merges) {
      plan.dims.back() *= out[d];
      for (size_t k = 0; k < operands; ++k) plan.strides[k].back() = full[k][d];
      continue;
    }
    plan.dims.push_back(out[d]);
    for (size_t k = 0; k < operands; ++k) plan.strides[k].push_back(full[k][d]);
  }
  if (plan.dims.empty()) {  // one element
    plan.dims = {1};
    for (size_t k = 0; k < operands; ++k) plan.strides[k] = {0};
  }
  return plan;
}

// One row of `n`: each operand runs along it (true) or is one value for all of it.
template <class T, bool C, bool X, bool Y>
void select_row(const uint8_t* c, const T* x, const T* y, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = c[C ? i : 0] != 0 ? x[X ? i : 0] : y[Y ? i : 0];
}

template <class T>
using SelectRow = void (*)(const uint8_t*, const T*, const T*, T*, int64_t);

template <class T>
SelectRow<T> select_row_for(bool c, bool x, bool y) {
  static constexpr SelectRow<T> rows[8] = {
      select_row<T, false, false, false>, select_row<T, false, false, true>,
      select_row<T, false, true, false>,  select_row<T, false, true, true>,
      select_row<T, true, false, false>,  select_row<T, true, false, true>,
      select_row<T, true, true, false>,   select_row<T, true, true, true>};
  return rows[(c ? 4 : 0) + (x ? 2 : 0) + (y ? 1 : 0)];
}

template <class T>
void run_select(const SelectPlan& plan, const uint8_t* c, const T* x, const T* y, T* out) {
  const size_t rank = plan.dims.size();
  const int64_t inner = plan.dims[rank - 1];
  const auto& cs = plan.strides[0];
  const auto& xs = plan.strides[1];
  const auto& ys = plan.strides[2];
  // A broadcast innermost axis (stride 0) reads one value per row; otherwise its stride is 1.
  const SelectRow<T> row =
      select_row_for<T>(cs[rank - 1] != 0, xs[rank - 1] != 0, ys[rank - 1] != 0);
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < rank; ++d) outer *= plan.dims[d];
  const int64_t bytes = outer * inner * static_cast<int64_t>(sizeof(T));
  for_each_index_if(bytes > (int64_t{1} << 18) && outer > 1, outer, [&](int64_t o) {
    int64_t ci = 0, xi = 0, yi = 0, rest = o;
    for (size_t d = rank - 1; d-- > 0;) {
      const int64_t i = rest % plan.dims[d];
      rest /= plan.dims[d];
      ci += i * cs[d];
      xi += i * xs[d];
      yi += i * ys[d];
    }
    row(c + ci, x + xi, y + yi, out + o * inner, inner);
  });
}

class SelectKernel final : public Kernel {
 public:
  explicit SelectKernel(const KernelRequest& r) : node_(r.node) {}
  std::string implementation() const override { return "dnnl:select"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    Tensor& y = out[0];
    if (y.size() == 0) return;
    for (size_t k = 0; k < operands; ++k)
      if (in[k].shape().rank() > y.shape().rank())
        throw ExecutionError("Where node '" + node_.name + "': input " + std::to_string(k) +
                             " of shape " + in[k].shape().to_string() +
                             " has more axes than the output " + y.shape().to_string());
    const SelectPlan plan = plan_select(in, y.shape());
    const auto* c = static_cast<const uint8_t*>(in[0].raw_data());
    switch (element_size(y.element_type())) {
      case 1:
        return run_typed<uint8_t>(plan, c, in, y);
      case 2:
        return run_typed<uint16_t>(plan, c, in, y);
      case 4:
        return run_typed<uint32_t>(plan, c, in, y);
      case 8:
        return run_typed<uint64_t>(plan, c, in, y);
      default:
        throw ExecutionError("Where node '" + node_.name + "': elements of " +
                             std::to_string(element_size(y.element_type())) + " bytes");
    }
  }

 private:
  template <class T>
  static void run_typed(const SelectPlan& plan, const uint8_t* c, const std::vector<Tensor>& in,
                        Tensor& y) {
    run_select(plan, c, static_cast<const T*>(in[1].raw_data()),
               static_cast<const T*>(in[2].raw_data()), static_cast<T*>(y.raw_data()));
  }

  Node node_;
};

std::unique_ptr<Kernel> make_select(const KernelRequest& r) {
  if (r.inputs.size() != 3 || r.outputs.size() != 1 || r.inputs[0].type != ElementType::boolean)
    return nullptr;
  for (size_t k = 0; k < operands; ++k)
    if (r.input_layout(k) != TensorLayout{}) return nullptr;
  if (r.output_layout(0) != TensorLayout{}) return nullptr;
  const size_t es = element_size(r.outputs[0].type);
  if (es != 1 && es != 2 && es != 4 && es != 8) return nullptr;
  return std::make_unique<SelectKernel>(r);
}

}  // namespace

void register_select(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "Where", make_select);
}

}  // namespace troupe::kernels::onednn
