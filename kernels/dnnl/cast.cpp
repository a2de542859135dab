// Cast and CastLike between the numeric types and bool (masks and indices: f32, i64, bool, ...),
// each value converted as the reference converts it (reference::cast_value, for the types its
// dispatch_any knows), in chunks the stream's threads share. An attention mask or a B-spline
// basis cast from bool to f32 (0.55 M elements) took 0.16 ms on the reference's single loop.
#include <memory>
#include <string>
#include <vector>

#include "kernels/dnnl/chunked_loop.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/reference/element_types.hpp"

namespace troupe::kernels::onednn {

namespace {

// Every type but text (reference::dispatch_any's: the numeric types and bool).
bool casts_type(ElementType type) {
  return type != ElementType::string && type != ElementType::undefined;
}

template <class To, class From>
void convert(const From* __restrict src, To* __restrict dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = reference::cast_value<To>(src[i]);
}

class CastKernel final : public Kernel {
 public:
  explicit CastKernel(const KernelRequest& request) : node_(request.node) {
    if (request.inputs.empty() || request.outputs.size() != 1 ||
        !casts_type(request.inputs[0].type) || !casts_type(request.outputs[0].type) ||
        !request.input_layout(0).is_plain() || !request.output_layout(0).is_plain())
      throw Unsupported{};
  }

  std::string implementation() const override { return "dnnl:cast"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const Tensor x = in[0].contiguous();
    Tensor& y = out[0];
    reference::dispatch_any(node_, x.element_type(), [&](auto from) {
      using From = typename decltype(from)::type;
      reference::dispatch_any(node_, y.element_type(), [&](auto to) {
        using To = typename decltype(to)::type;
        const From* src = x.data<From>();
        To* dst = y.data<To>();
        for_each_chunk(y.size(), elementwise_chunk, [&](int64_t begin, int64_t count) {
          convert(src + begin, dst + begin, count);
        });
      });
    });
  }

 private:
  Node node_;
};

}  // namespace

void register_cast(KernelRegistry& registry) {
  for (const char* op : {"Cast", "CastLike"})
    registry.add(backend_name, backend_priority, op, construct_kernel<CastKernel>);
}

}  // namespace troupe::kernels::onednn
