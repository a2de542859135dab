// Equal, Less, Greater, LessOrEqual and GreaterOrEqual of f32 tensors of one shape, or with one
// operand a single value, into a bool tensor: vectorized per ISA, chunks spread over the stream's
// threads. A detector's peak extraction compares whole score maps (CenterNet: heatmap ==
// max_pool(heatmap) over 80 x 128 x 128 took 3.5 ms on the reference's broadcasting loop). Other
// broadcasts, and sizes known only at run time that turn out to broadcast, run the reference.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/dnnl/chunked_loop.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/vector_exp.hpp"  // TROUPE_ISA_CLONES

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

// How the operands line up: element by element, or one of them a single value.
enum class Pairing { elementwise, scalar_b, scalar_a };

#define TROUPE_COMPARE_LOOPS(OP)                           \
  switch (pairing) {                                       \
    case Pairing::elementwise:                             \
      for (int64_t i = 0; i < n; ++i) y[i] = a[i] OP b[i]; \
      return;                                              \
    case Pairing::scalar_b:                                \
      for (int64_t i = 0; i < n; ++i) y[i] = a[i] OP b[0]; \
      return;                                              \
    case Pairing::scalar_a:                                \
      for (int64_t i = 0; i < n; ++i) y[i] = a[0] OP b[i]; \
      return;                                              \
  }

// IEEE comparisons, as the reference makes them: anything compared with NaN is false.
TROUPE_ISA_CLONES void compare(const float* a, const float* b, bool* y, int64_t n,
                               Relation relation, Pairing pairing) {
  switch (relation) {
    case Relation::equal:
      TROUPE_COMPARE_LOOPS(==)
      return;
    case Relation::less:
      TROUPE_COMPARE_LOOPS(<)
      return;
    case Relation::greater:
      TROUPE_COMPARE_LOOPS(>)
      return;
    case Relation::less_or_equal:
      TROUPE_COMPARE_LOOPS(<=)
      return;
    case Relation::greater_or_equal:
      TROUPE_COMPARE_LOOPS(>=)
      return;
  }
}

#undef TROUPE_COMPARE_LOOPS

class ComparisonKernel final : public Kernel {
 public:
  explicit ComparisonKernel(const KernelRequest& request)
      : relation_(relation_of(request.node.op_type)) {
    const auto& in = request.inputs;
    if (in.size() != 2 || in[0].type != ElementType::f32 || in[1].type != ElementType::f32 ||
        request.outputs.size() != 1 || request.outputs[0].type != ElementType::boolean ||
        !request.input_layout(0).is_plain() || !request.input_layout(1).is_plain())
      throw Unsupported{};
    const bool static_shapes = in[0].shape.is_static() && in[1].shape.is_static();
    if (static_shapes && !pairing(in[0].shape, in[1].shape)) throw Unsupported{};
    if (!static_shapes) {
      fallback_ = KernelRegistry::instance().create_with("reference", request);
      if (!fallback_) throw Unsupported{};
    }
  }

  std::string implementation() const override { return "dnnl:comparison"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const std::optional<Pairing> how = pairing(in[0].shape(), in[1].shape());
    if (!how) return fallback_->execute(in, out);
    const Tensor a = in[0].contiguous(), b = in[1].contiguous();
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    bool* y = out[0].data<bool>();
    for_each_chunk(out[0].size(), 16384, [&](int64_t begin, int64_t count) {
      compare(*how == Pairing::scalar_a ? pa : pa + begin,
              *how == Pairing::scalar_b ? pb : pb + begin, y + begin, count, relation_, *how);
    });
  }

 private:
  static std::optional<Pairing> pairing(const Shape& a, const Shape& b) {
    if (a == b) return Pairing::elementwise;
    // One single value, of a rank no higher than the other's (else the output gains axes).
    if (b.element_count() == 1 && b.rank() <= a.rank()) return Pairing::scalar_b;
    if (a.element_count() == 1 && a.rank() <= b.rank()) return Pairing::scalar_a;
    return std::nullopt;
  }

  Relation relation_;
  std::unique_ptr<Kernel> fallback_;  // shapes known only at run time that broadcast otherwise
};

}  // namespace

void register_comparison(KernelRegistry& registry) {
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})
    registry.add(backend_name, backend_priority, op, construct_kernel<ComparisonKernel>);
}

}  // namespace troupe::kernels::onednn
