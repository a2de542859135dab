// ArgMax and ArgMin of f32 tensors along one axis. The reference walks each output element's axis
// with a stride of everything inside it (a segmentation head's argmax over 21 classes of
// [1,21,512,512] took 24 ms); here the axis is the outer loop and the elements inside it the inner
// one, so each step compares one contiguous row with the best values so far. The comparisons are
// the reference's (strictly better, or equal too with select_last_index), so NaNs and ties pick
// the same index.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/team.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

class ArgExtremumKernel final : public Kernel {
 public:
  explicit ArgExtremumKernel(const KernelRequest& r)
      : node_(r.node),
        largest_(r.node.op_type == "ArgMax"),
        last_(r.node.attributes.get_int_or("select_last_index", 0) != 0),
        axis_(r.node.attributes.get_int_or("axis", 0)) {}
  std::string implementation() const override { return "dnnl:arg_rows"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const Tensor x = in[0].contiguous();
    const std::vector<int64_t>& dims = x.shape().dims();
    const auto rank = static_cast<int64_t>(dims.size());
    const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    if (axis < 0 || axis >= rank)
      throw ExecutionError(node_.op_type + " node '" + node_.name + "': axis " +
                           std::to_string(axis_) + " is out of range for rank " +
                           std::to_string(rank));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= dims[static_cast<size_t>(d)];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= dims[static_cast<size_t>(d)];
    const int64_t n = dims[static_cast<size_t>(axis)];
    if (n == 0 || n > INT32_MAX)
      throw ExecutionError(
          node_.op_type + " node '" + node_.name +
          "': cannot take the arg-extremum of an empty axis (or one of 2^31 elements and more)");
    if (out[0].size() != outer * inner)
      throw ExecutionError(node_.op_type + " node '" + node_.name +
                           "': output shape does not match the input");
    const float* src = x.data<float>();
    int64_t* dst = out[0].data<int64_t>();
    // Blocks of the inner rows, so that each thread keeps its best values in cache.
    constexpr int64_t block = 1024;
    const int64_t blocks = (inner + block - 1) / block;
    run_team_if(x.size() > (int64_t{1} << 16) && outer * blocks > 1, [&] {
      std::vector<float> best(static_cast<size_t>(block));
      std::vector<int32_t> where(static_cast<size_t>(block));
#pragma omp for schedule(static)
      for (int64_t w = 0; w < outer * blocks; ++w) {
        const int64_t o = w / blocks;
        const int64_t begin = (w % blocks) * block;
        const int64_t count = std::min(block, inner - begin);
        const float* plane = src + o * n * inner + begin;
        std::copy(plane, plane + count, best.begin());
        std::fill(where.begin(), where.begin() + count, 0);
        for (int64_t k = 1; k < n; ++k) {
          if (largest_)
            last_ ? step<true, true>(plane + k * inner, k, count, best.data(), where.data())
                  : step<true, false>(plane + k * inner, k, count, best.data(), where.data());
          else
            last_ ? step<false, true>(plane + k * inner, k, count, best.data(), where.data())
                  : step<false, false>(plane + k * inner, k, count, best.data(), where.data());
        }
        int64_t* index = dst + o * inner + begin;
        for (int64_t i = 0; i < count; ++i) index[i] = where[static_cast<size_t>(i)];
      }
    });
  }

 private:
  // One row k against the best so far, as selects the compiler vectorizes.
  template <bool largest, bool last>
  static void step(const float* row, int64_t k, int64_t count, float* best, int32_t* where) {
    const auto index = static_cast<int32_t>(k);
    for (int64_t i = 0; i < count; ++i) {
      const float v = row[i];
      const float b = best[i];
      const bool take = (largest ? v > b : v < b) || (last && v == b);
      best[i] = take ? v : b;
      where[i] = take ? index : where[i];
    }
  }

  Node node_;
  bool largest_;
  bool last_;
  int64_t axis_;
};

std::unique_ptr<Kernel> make_arg_extremum(const KernelRequest& r) {
  if (r.inputs.empty() || r.inputs[0].type != ElementType::f32 || r.outputs.size() != 1 ||
      r.outputs[0].type != ElementType::i64 || r.input_layout(0) != TensorLayout{})
    return nullptr;
  return std::make_unique<ArgExtremumKernel>(r);
}

}  // namespace

void register_arg_extremum(KernelRegistry& registry) {
  for (const char* op : {"ArgMax", "ArgMin"})
    registry.add(backend_name, backend_priority, op, make_arg_extremum);
}

}  // namespace troupe::kernels::onednn
