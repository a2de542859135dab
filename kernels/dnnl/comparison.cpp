// Equal, Less, Greater, LessOrEqual and GreaterOrEqual of f32, i32 or i64 tensors into a bool
// tensor, and And, Or and Xor of bool tensors: any broadcast of the two operands, as rows
// (broadcast_rows.hpp), the rows spread over the stream's threads when the output is large. A
// detector's peak extraction compares whole score maps (CenterNet: heatmap == max_pool(heatmap)
// over 80 x 128 x 128 took 3.5 ms on the reference's broadcasting loop); a KAN layer's B-spline
// bases compare [64,784,1] inputs with a [784,11] grid and join two such masks, 1.1-1.5 ms per
// op on the reference for 0.55 M elements.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/dnnl/broadcast_rows.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"

namespace troupe::kernels::onednn {

namespace {

enum class Relation { equal, less, greater, less_or_equal, greater_or_equal };

Relation relation_of(const std::string& op) {
  if (op == "Equal") return Relation::equal;
  if (op == "Less") return Relation::less;
  if (op == "Greater") return Relation::greater;
  if (op == "LessOrEqual") return Relation::less_or_equal;
  return Relation::greater_or_equal;
}

bool compares_type(ElementType type) {
  return type == ElementType::f32 || type == ElementType::i32 || type == ElementType::i64;
}

// IEEE comparisons, as the reference makes them: anything compared with NaN is false.
template <class T>
void compare(const BroadcastRows& plan, const T* a, const T* b, bool* y, Relation relation) {
  switch (relation) {
    case Relation::equal:
      return compute_rows(plan, a, b, y, [](T u, T v) { return u == v; });
    case Relation::less:
      return compute_rows(plan, a, b, y, [](T u, T v) { return u < v; });
    case Relation::greater:
      return compute_rows(plan, a, b, y, [](T u, T v) { return u > v; });
    case Relation::less_or_equal:
      return compute_rows(plan, a, b, y, [](T u, T v) { return u <= v; });
    case Relation::greater_or_equal:
      return compute_rows(plan, a, b, y, [](T u, T v) { return u >= v; });
  }
}

class ComparisonKernel final : public BroadcastKernel {
 public:
  explicit ComparisonKernel(const KernelRequest& request)
      : BroadcastKernel(request), relation_(relation_of(request.node.op_type)) {
    const auto& in = request.inputs;
    if (!compares_type(in[0].type) || in[1].type != in[0].type ||
        request.outputs[0].type != ElementType::boolean)
      throw Unsupported{};
  }

  std::string implementation() const override { return "dnnl:comparison"; }

 protected:
  void run(const BroadcastRows& plan, const Tensor& a, const Tensor& b, Tensor& y) override {
    bool* out = y.data<bool>();
    switch (a.element_type()) {
      case ElementType::f32:
        return compare(plan, a.data<float>(), b.data<float>(), out, relation_);
      case ElementType::i32:
        return compare(plan, a.data<int32_t>(), b.data<int32_t>(), out, relation_);
      default:
        return compare(plan, a.data<int64_t>(), b.data<int64_t>(), out, relation_);
    }
  }

 private:
  Relation relation_;
};

enum class Logic { conjunction, disjunction, exclusive };

class LogicalKernel final : public BroadcastKernel {
 public:
  explicit LogicalKernel(const KernelRequest& request) : BroadcastKernel(request) {
    const std::string& op = request.node.op_type;
    logic_ = op == "And" ? Logic::conjunction : op == "Or" ? Logic::disjunction : Logic::exclusive;
    for (const ValueInfo& v : {request.inputs[0], request.inputs[1], request.outputs[0]})
      if (v.type != ElementType::boolean) throw Unsupported{};
  }

  std::string implementation() const override { return "dnnl:logical"; }

 protected:
  void run(const BroadcastRows& plan, const Tensor& a, const Tensor& b, Tensor& y) override {
    const bool* pa = a.data<bool>();
    const bool* pb = b.data<bool>();
    bool* out = y.data<bool>();
    switch (logic_) {
      case Logic::conjunction:
        return compute_rows(plan, pa, pb, out, [](bool u, bool v) { return u && v; });
      case Logic::disjunction:
        return compute_rows(plan, pa, pb, out, [](bool u, bool v) { return u || v; });
      case Logic::exclusive:
        return compute_rows(plan, pa, pb, out, [](bool u, bool v) { return u != v; });
    }
  }

 private:
  Logic logic_ = Logic::conjunction;
};

}  // namespace

void register_comparison(KernelRegistry& registry) {
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})
    registry.add(backend_name, backend_priority, op, construct_kernel<ComparisonKernel>);
  for (const char* op : {"And", "Or", "Xor"})
    registry.add(backend_name, backend_priority, op, construct_kernel<LogicalKernel>);
}

}  // namespace troupe::kernels::onednn
