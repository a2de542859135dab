// ReduceMean, ReduceSum, ReduceMax, ReduceMin and ReduceProd on oneDNN's reduction primitive, with
// the axes known when the kernel is prepared (an attribute or a constant input). The output is
// described with the reduced axes kept as 1: keepdims changes only its shape, not its memory.
#include <algorithm>
#include <cmath>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/team.hpp"
#include "kernels/reference/reduction.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

dnnl::algorithm algorithm_of(const std::string& op) {
  if (op == "ReduceMean") return dnnl::algorithm::reduction_mean;
  if (op == "ReduceSum") return dnnl::algorithm::reduction_sum;
  if (op == "ReduceMax") return dnnl::algorithm::reduction_max;
  if (op == "ReduceMin") return dnnl::algorithm::reduction_min;
  return dnnl::algorithm::reduction_mul;  // ReduceProd
}

class ReductionKernel final : public SrcDstKernel {
 public:
  explicit ReductionKernel(const KernelRequest& request)
      : SrcDstKernel(request), algorithm_(algorithm_of(request.node.op_type)) {
    if (present_outputs(request) != 1) throw Unsupported{};
    // Axes given at run time would need a primitive per run: the reference takes them.
    if (has_input(1) && constant(1) == nullptr) throw Unsupported{};
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    const size_t rank = inputs[0].rank();
    if (rank == 0 || rank > DNNL_MAX_NDIMS) return false;
    std::vector<Tensor> given = {Tensor()};
    if (has_input(1)) given.push_back(*constant(1));
    const std::vector<bool> reduced = reference::reduced_dims(node_, given, rank);
    const Dims src = to_dims(inputs[0]);
    Dims dst = src;
    for (size_t d = 0; d < rank; ++d)
      if (reduced[d]) dst[d] = 1;
    if (dst == src || outputs[0].element_count() !=
                          Shape(std::vector<int64_t>(dst.begin(), dst.end())).element_count())
      return false;  // nothing reduced: a copy, which the reference does
    const dnnl::memory::desc src_md = plain_f32(src);
    const dnnl::memory::desc dst_md = plain_f32(dst);
    dnnl::reduction::desc desc(algorithm_, src_md, dst_md, 0.0f, 0.0f);
    dnnl::reduction::primitive_desc pd(desc, primitive_attributes(), cpu_engine());
    // oneDNN 2.6's JIT reduction takes the innermost axes only; it answers any other with its
    // reference kernel (a mean over the channels of [1,21,512,512]: 42 ms), which the row
    // reduction below beats.
    if (is_reference(pd)) return false;
    return adopt<dnnl::reduction>(pd, src_md, dst_md);
  }

 private:
  dnnl::algorithm algorithm_;
};

// A reduction over one run of adjacent axes, [outer, n, inner] -> [outer, inner], as n passes
// over contiguous rows of `inner` elements accumulated element-wise (the channel mean or max of
// an image, CBAM's spatial attention), and the norms L1, L2 and SumSquare over any axes (the L2
// of F.normalize over the last axis): what oneDNN's JIT reduction does not take.
class RowReductionKernel final : public Kernel {
 public:
  enum class Kind { sum, mean, max, min, prod, l1, l2, sum_square };

  static Kind kind_of(const std::string& op) {
    if (op == "ReduceMean") return Kind::mean;
    if (op == "ReduceMax") return Kind::max;
    if (op == "ReduceMin") return Kind::min;
    if (op == "ReduceProd") return Kind::prod;
    if (op == "ReduceL1") return Kind::l1;
    if (op == "ReduceL2") return Kind::l2;
    if (op == "ReduceSumSquare") return Kind::sum_square;
    return Kind::sum;
  }

  explicit RowReductionKernel(const KernelRequest& request)
      : node_(request.node), kind_(kind_of(request.node.op_type)) {
    if (request.inputs.size() > 1 && request.inputs[1].type != ElementType::undefined) {
      if (request.constant_inputs.size() < 2 || !request.constant_inputs[1]) throw Unsupported{};
      axes_ = *request.constant_inputs[1];
    }
  }
  std::string implementation() const override { return "dnnl:row_reduction"; }

  void execute(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    const Tensor x = inputs[0].contiguous();
    const std::vector<int64_t>& dims = x.shape().dims();
    const std::vector<bool> reduced =
        reference::reduced_dims(node_, {Tensor(), axes_}, dims.size());
    // The reduced axes (ignoring axes of one element) must be adjacent: [first, last].
    int64_t first = -1, last = -1;
    bool adjacent = true;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (!reduced[d] || dims[d] == 1) continue;
      const auto a = static_cast<int64_t>(d);
      if (first < 0) first = a;
      for (int64_t between = last + 1; last >= 0 && between < a; ++between)
        if (dims[static_cast<size_t>(between)] != 1) adjacent = false;
      last = a;
    }
    if (!adjacent || first < 0) {
      reference_(inputs, outputs);
      return;
    }
    int64_t outer = 1, n = 1, inner = 1;
    for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d)
      (d < first ? outer : d <= last ? n : inner) *= dims[static_cast<size_t>(d)];
    if (outputs[0].size() != outer * inner)
      throw ExecutionError(node_.op_type + " node '" + node_.name +
                           "': output shape does not match the reduction");
    const float* src = x.data<float>();
    float* dst = outputs[0].data<float>();
    const Kind kind = kind_;
    if (inner == 1) {
      // The last axes reduced (F.normalize's L2): each output is one contiguous run of n.
      for_each_index_if(x.size() > (int64_t{1} << 16) && outer > 1, outer,
                        [&](int64_t o) { dst[o] = reduce_run(kind, src + o * n, n); });
      return;
    }
    for_each_index_if(x.size() > (int64_t{1} << 16) && outer * inner > 1,
                      outer * ((inner + 1023) / 1024), [&](int64_t w) {
                        const int64_t blocks = (inner + 1023) / 1024;
                        const int64_t o = w / blocks, begin = (w % blocks) * 1024;
                        const int64_t count = std::min<int64_t>(1024, inner - begin);
                        const float* plane = src + o * n * inner + begin;
                        float* out = dst + o * inner + begin;
                        for (int64_t k = 0; k < n; ++k) {
                          const float* row = plane + k * inner;
                          switch (kind) {
                            case Kind::max:
                              for (int64_t i = 0; i < count; ++i)
                                out[i] = k ? std::max(out[i], row[i]) : row[i];
                              break;
                            case Kind::min:
                              for (int64_t i = 0; i < count; ++i)
                                out[i] = k ? std::min(out[i], row[i]) : row[i];
                              break;
                            case Kind::prod:
                              for (int64_t i = 0; i < count; ++i)
                                out[i] = k ? out[i] * row[i] : row[i];
                              break;
                            case Kind::l1:
                              for (int64_t i = 0; i < count; ++i)
                                out[i] = (k ? out[i] : 0.f) + std::fabs(row[i]);
                              break;
                            case Kind::l2:
                            case Kind::sum_square:
                              for (int64_t i = 0; i < count; ++i)
                                out[i] = (k ? out[i] : 0.f) + row[i] * row[i];
                              break;
                            default:
                              for (int64_t i = 0; i < count; ++i)
                                out[i] = k ? out[i] + row[i] : row[i];
                          }
                        }
                        if (kind == Kind::mean) {
                          const float scale = 1.f / static_cast<float>(n);
                          for (int64_t i = 0; i < count; ++i) out[i] *= scale;
                        }
                        if (kind == Kind::l2)
                          for (int64_t i = 0; i < count; ++i) out[i] = std::sqrt(out[i]);
                      });
  }

 private:
  static float reduce_run(Kind kind, const float* x, int64_t n) {
    float acc = kind == Kind::prod ? 1.f : 0.f;
    switch (kind) {
      case Kind::max:
        acc = x[0];
        for (int64_t i = 1; i < n; ++i) acc = std::max(acc, x[i]);
        return acc;
      case Kind::min:
        acc = x[0];
        for (int64_t i = 1; i < n; ++i) acc = std::min(acc, x[i]);
        return acc;
      case Kind::prod:
        for (int64_t i = 0; i < n; ++i) acc *= x[i];
        return acc;
      case Kind::l1:
        for (int64_t i = 0; i < n; ++i) acc += std::fabs(x[i]);
        return acc;
      case Kind::l2:
      case Kind::sum_square:
        for (int64_t i = 0; i < n; ++i) acc += x[i] * x[i];
        return kind == Kind::l2 ? std::sqrt(acc) : acc;
      default:
        for (int64_t i = 0; i < n; ++i) acc += x[i];
        return kind == Kind::mean ? acc / static_cast<float>(n) : acc;
    }
  }

  void reference_(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
    if (!fallback_) {
      std::vector<ValueInfo> in, out;
      for (const Tensor& t : inputs) in.push_back({"", t.element_type(), t.shape()});
      for (const Tensor& t : outputs) out.push_back({"", t.element_type(), t.shape()});
      fallback_ =
          KernelRegistry::instance().create_with("reference", KernelRequest{node_, in, out});
    }
    fallback_->execute(inputs, outputs);
  }

  Node node_;
  Kind kind_;
  Tensor axes_;  // a constant axes input, else empty (the attribute, or all axes)
  std::unique_ptr<Kernel> fallback_;
};

std::unique_ptr<Kernel> make_reduction(const KernelRequest& request) {
  const std::string& op = request.node.op_type;
  // oneDNN 2.6 answers its norms with its reference kernel whatever the axes.
  const bool norm = op == "ReduceL1" || op == "ReduceL2" || op == "ReduceSumSquare";
  const bool rows = !request.inputs.empty() && request.inputs[0].type == ElementType::f32 &&
                    request.outputs.size() == 1 && request.outputs[0].type == ElementType::f32 &&
                    request.input_layout(0) == TensorLayout{};
  // Keeping the innermost axis, the reduction is oneDNN's reference's whatever the shapes (known
  // only at run time in a model with a dynamic batch): the rows take it from the start.
  const size_t rank = request.inputs.empty() ? 0 : request.inputs[0].shape.rank();
  if (rows && norm) return construct_kernel<RowReductionKernel>(request);
  if (norm) return nullptr;
  if (rows && rank > 0 &&
      (request.inputs.size() < 2 || request.inputs[1].type == ElementType::undefined ||
       (request.constant_inputs.size() > 1 && request.constant_inputs[1]))) {
    std::vector<Tensor> given = {Tensor()};
    if (request.inputs.size() > 1 && request.inputs[1].type != ElementType::undefined)
      given.push_back(*request.constant_inputs[1]);
    if (!reference::reduced_dims(request.node, given, rank).back())
      return construct_kernel<RowReductionKernel>(request);
  }
  if (auto kernel = make_kernel_for_data<ReductionKernel>(request)) return kernel;
  return rows ? construct_kernel<RowReductionKernel>(request) : nullptr;
}

}  // namespace

void register_reduction(KernelRegistry& registry) {
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
                         "ReduceL1", "ReduceL2", "ReduceSumSquare"})
    registry.add(backend_name, backend_priority, op, make_reduction);
}

}  // namespace troupe::kernels::onednn
