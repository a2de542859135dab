// Einsum of two f32 operands as one oneDNN matmul: every label is a batch label (both inputs and
// the output), a row label (the first input and the output), a column label (the second input and
// the output) or a contracted one (both inputs, not the output). The operands are read in place
// through strided descriptors where their labels already nest as [batch..., rows, contracted]
// and [batch..., contracted, columns] (an attention's "bhqd,bhkd->bhqk"), else reordered into
// that order first; the product is written straight into the output where the output's strides
// allow, else reordered into it. Equations with one operand, a repeated label (a diagonal) or a
// label summed within one operand run on the reference kernel.
#include <algorithm>
#include <optional>
#include <tuple>

#include "engine/ops/einsum.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/strided_copy.hpp"

namespace troupe::kernels::onednn {

namespace {

// One operand seen through its labels: each label's size and element stride.
struct Operand {
  std::vector<int> labels;
  Dims dims;
  Dims strides;

  int64_t size(int label) const { return dims[at(label)]; }
  int64_t stride(int label) const { return strides[at(label)]; }
  size_t at(int label) const {
    return static_cast<size_t>(std::find(labels.begin(), labels.end(), label) - labels.begin());
  }
};

// The labels `group` of `op` as one dimension, when they nest in memory in that order (each
// label's stride is the next one's extent): its size and stride. Labels of size 1 never break
// the nesting. An empty group is one dimension of size 1.
std::optional<std::pair<int64_t, int64_t>> merged(const Operand& op,
                                                  const std::vector<int>& group) {
  int64_t size = 1;
  int64_t stride = 1;
  bool first = true;
  for (auto it = group.rbegin(); it != group.rend(); ++it) {
    const int64_t n = op.size(*it);
    if (n == 1) continue;
    if (first) {
      stride = op.stride(*it);
      first = false;
    } else if (op.stride(*it) != stride * size) {
      return std::nullopt;
    }
    size *= n;
  }
  return std::make_pair(size, stride);
}

// `op`'s labels in the order `order`, as a view over its memory (the same strides, permuted).
dnnl::memory::desc view(const Operand& op, const std::vector<int>& order) {
  Dims dims, strides;
  for (int label : order) {
    dims.push_back(op.size(label));
    strides.push_back(op.stride(label));
  }
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

// The same labels laid out densely in `order`.
Operand dense(const Operand& op, const std::vector<int>& order) {
  Operand result;
  result.labels = order;
  for (int label : order) result.dims.push_back(op.size(label));
  result.strides = dense_strides(result.dims);
  return result;
}

// A matmul operand [batch..., first, second] over `op`'s memory, the two groups merged; nullopt
// where they do not nest.
std::optional<dnnl::memory::desc> matmul_view(const Operand& op, const std::vector<int>& batch,
                                              const std::vector<int>& first,
                                              const std::vector<int>& second) {
  const auto a = merged(op, first);
  const auto b = merged(op, second);
  if (!a || !b) return std::nullopt;
  Dims dims, strides;
  for (int label : batch) {  // every operand has them (size 1 where it broadcasts)
    dims.push_back(op.size(label));
    strides.push_back(op.stride(label));
  }
  dims.push_back(a->first);
  strides.push_back(a->second);
  dims.push_back(b->first);
  strides.push_back(b->second);
  // A dimension of size 1 is never stepped over; give it a stride oneDNN accepts as plain.
  for (size_t d = dims.size(); d-- > 0;)
    if (dims[d] == 1) strides[d] = d + 1 < dims.size() ? strides[d + 1] * dims[d + 1] : 1;
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

class EinsumKernel final : public DnnlKernel {
 public:
  explicit EinsumKernel(const KernelRequest& request) : DnnlKernel(request) {
    if (request.inputs.size() != 2 || present_outputs(request) != 1) throw Unsupported{};
    equation_ = einsum::parse(request.node.attributes.get_string_or("equation", ""),
                              {request.inputs[0].shape.rank(), request.inputs[1].shape.rank()});
    if (!equation_.error.empty()) throw Unsupported{};
    const auto& a = equation_.inputs[0];
    const auto& b = equation_.inputs[1];
    const auto& out = equation_.output;
    auto count = [](const std::vector<int>& labels, int label) {
      return std::count(labels.begin(), labels.end(), label);
    };
    for (const auto* labels : {&a, &b})
      for (int label : *labels)
        if (count(*labels, label) != 1) throw Unsupported{};  // a diagonal
    // Batch, row and column labels in the output's order; contracted ones in A's.
    for (int label : out) {
      const bool in_a = count(a, label) > 0, in_b = count(b, label) > 0;
      (in_a && in_b ? batch_ : in_a ? rows_ : columns_).push_back(label);
    }
    for (int label : a)
      if (count(out, label) == 0) {
        if (count(b, label) == 0) throw Unsupported{};  // summed within A alone
        contracted_.push_back(label);
      }
    for (int label : b)
      if (count(out, label) == 0 && count(a, label) == 0) throw Unsupported{};
    if (batch_.size() + 2 > DNNL_MAX_NDIMS || out.size() > DNNL_MAX_NDIMS) throw Unsupported{};
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    Operand a{equation_.inputs[0], to_dims(inputs[0]), {}};
    Operand b{equation_.inputs[1], to_dims(inputs[1]), {}};
    Operand y{equation_.output, to_dims(outputs[0]), {}};
    if (inputs[0].rank() == 0 || inputs[1].rank() == 0 || outputs[0].rank() == 0) return false;
    a.strides = dense_strides(a.dims);
    b.strides = dense_strides(b.dims);
    y.strides = dense_strides(y.dims);
    for (int label : contracted_)
      if (a.size(label) != b.size(label)) return false;

    // The canonical orders, in which every group nests.
    std::vector<int> a_order = batch_, b_order = batch_, y_order = batch_;
    a_order.insert(a_order.end(), rows_.begin(), rows_.end());
    a_order.insert(a_order.end(), contracted_.begin(), contracted_.end());
    b_order.insert(b_order.end(), contracted_.begin(), contracted_.end());
    b_order.insert(b_order.end(), columns_.begin(), columns_.end());
    y_order.insert(y_order.end(), rows_.begin(), rows_.end());
    y_order.insert(y_order.end(), columns_.begin(), columns_.end());
    const Operand a_dense = dense(a, a_order);
    const Operand b_dense = dense(b, b_order);
    const Operand y_dense = dense(y, y_order);

    auto build = [&](bool copies) {
      std::optional<dnnl::memory::desc> a_md, b_md, y_md;
      if (!copies) {
        a_md = matmul_view(a, batch_, rows_, contracted_);
        b_md = matmul_view(b, batch_, contracted_, columns_);
        y_md = matmul_view(y, batch_, rows_, columns_);
      }
      copy_a_ = !a_md;
      copy_b_ = !b_md;
      copy_y_ = !y_md;
      if (copy_a_) a_md = matmul_view(a_dense, batch_, rows_, contracted_);
      if (copy_b_) b_md = matmul_view(b_dense, batch_, contracted_, columns_);
      if (copy_y_) y_md = matmul_view(y_dense, batch_, rows_, columns_);
      dnnl::matmul::desc desc(*a_md, *b_md, *y_md);
      return std::make_tuple(
          dnnl::matmul::primitive_desc(desc, primitive_attributes(), cpu_engine()), *a_md, *b_md,
          *y_md);
    };
    // Strided operands where oneDNN runs them with a real kernel; dense copies otherwise.
    auto [pd, a_md, b_md, y_md] = build(false);
    if (is_reference(pd) && !(copy_a_ && copy_b_ && copy_y_))
      std::tie(pd, a_md, b_md, y_md) = build(true);

    primitive_ = Primitive::of<dnnl::matmul>(pd);
    a_ = unbound_memory(a_md);
    b_ = unbound_memory(b_md);
    y_ = unbound_memory(y_md);
    auto copier = [&](bool needed, const dnnl::memory::desc& from, const dnnl::memory::desc& to,
                      Copy& copy) {
      copy = Copy{};
      if (!needed) return;
      copy.from = unbound_memory(from);
      copy.to = dnnl::memory(to, cpu_engine());
      copy.reorder = dnnl::reorder(copy.from, copy.to);
    };
    copier(copy_a_, view(a, a_order), view(a_dense, a_order), a_copy_);
    copier(copy_b_, view(b, b_order), view(b_dense, b_order), b_copy_);
    // The product is computed densely, then reordered into the output's view.
    if (copy_y_) {
      y_copy_.from = dnnl::memory(view(y_dense, y_order), cpu_engine());
      y_copy_.to = unbound_memory(view(y, y_order));
      y_copy_.reorder = dnnl::reorder(y_copy_.from, y_copy_.to);
    }
    set_impl(pd);
    if (copy_a_ || copy_b_ || copy_y_) set_impl(std::string(pd.impl_info_str()) + "+reorder");
    return true;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    const dnnl::memory& a = operand(inputs[0], copy_a_, a_copy_, a_);
    const dnnl::memory& b = operand(inputs[1], copy_b_, b_copy_, b_);
    if (copy_y_) {
      y_.set_data_handle(y_copy_.from.get_data_handle());
    } else {
      bind(y_, outputs[0]);
    }
    primitive_.execute(stream_, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, y_}});
    if (copy_y_) {
      bind(y_copy_.to, outputs[0]);
      y_copy_.reorder.execute(stream_, y_copy_.from, y_copy_.to);
    }
  }

 private:
  struct Copy {
    dnnl::memory from;
    dnnl::memory to;
    dnnl::reorder reorder;
  };

  // The matmul's memory for an input: the tensor itself, or its reordered copy.
  const dnnl::memory& operand(const Tensor& tensor, bool copied, Copy& copy,
                              dnnl::memory& matmul_memory) {
    if (!copied) {
      bind(matmul_memory, tensor);
      return matmul_memory;
    }
    bind(copy.from, tensor);
    copy.reorder.execute(stream_, copy.from, copy.to);
    matmul_memory.set_data_handle(copy.to.get_data_handle());
    return matmul_memory;
  }

  einsum::Equation equation_;
  std::vector<int> batch_, rows_, columns_, contracted_;
  Primitive primitive_;
  dnnl::memory a_, b_, y_;  // the matmul's views
  bool copy_a_ = false, copy_b_ = false, copy_y_ = false;
  Copy a_copy_, b_copy_, y_copy_;
};

}  // namespace

void register_einsum(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "Einsum", make_kernel<EinsumKernel>);
}

}  // namespace troupe::kernels::onednn
