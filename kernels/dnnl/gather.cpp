// Gather as row copies: output row (o, j) is data row (o, indices[j]) of `inner` elements, any
// element type. Embedding lookups (a table of [vocabulary, width] rows) and the selection of q,
// k and v from a stacked projection (Swin's, timm's ViTs': Gather of one index on axis 0) ran on
// the reference, which copies on one thread: 14.5% of a DLRM's time. Indices are checked once;
// rows are spread over the stream's threads when there is enough to copy.
#include <omp.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

class GatherKernel final : public Kernel {
 public:
  explicit GatherKernel(const KernelRequest& r) : node_(r.node) {
    if (r.inputs.size() != 2 || r.outputs.size() != 1 || r.inputs[0].type != r.outputs[0].type ||
        (r.inputs[1].type != ElementType::i64 && r.inputs[1].type != ElementType::i32) ||
        element_size(r.inputs[0].type) == 0)
      throw Unsupported{};
  }

  std::string implementation() const override { return "dnnl:gather_rows"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const std::vector<int64_t>& dims = in[0].shape().dims();
    const auto rank = static_cast<int64_t>(dims.size());
    int64_t axis = node_.attributes.get_int_or("axis", 0);
    if (axis < -rank || axis >= rank)
      fail("axis " + std::to_string(axis) + " is out of range for data " +
           in[0].shape().to_string());
    if (axis < 0) axis += rank;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) {
      if (d < axis) outer *= dims[static_cast<size_t>(d)];
      if (d > axis) inner *= dims[static_cast<size_t>(d)];
    }
    const int64_t extent = dims[static_cast<size_t>(axis)];
    const int64_t count = in[1].size();
    if (out[0].size() != outer * count * inner)
      fail("output has " + std::to_string(out[0].size()) + " elements, expected " +
           std::to_string(outer * count * inner));
    std::vector<int64_t>& rows = rows_;  // kept between runs: no allocation per lookup
    rows.resize(static_cast<size_t>(count));
    for (int64_t j = 0; j < count; ++j) {
      const int64_t v = in[1].element_type() == ElementType::i64
                            ? in[1].data<int64_t>()[j]
                            : static_cast<int64_t>(in[1].data<int32_t>()[j]);
      const int64_t row = v < 0 ? v + extent : v;
      if (row < 0 || row >= extent)
        fail("index " + std::to_string(v) + " is out of range for axis " + std::to_string(axis) +
             " of size " + std::to_string(extent));
      rows[static_cast<size_t>(j)] = row;
    }
    const size_t row_bytes = static_cast<size_t>(inner) * element_size(in[0].element_type());
    const auto* src = static_cast<const uint8_t*>(in[0].raw_data());
    auto* dst = static_cast<uint8_t*>(out[0].raw_data());
    const int64_t copies = outer * count;
    const bool parallel =
        static_cast<size_t>(copies) * row_bytes >= (size_t{1} << 16) && copies > 1;
    if (inner == 1) {
      // Single elements (a Gather along the last axis: nn.Unfold's columns, a token's last
      // position): a call to memcpy per element cost 2 ns each (RedNet's unfold, 70% of its
      // time); a typed loop over an outer row's indices vectorises.
      switch (row_bytes) {
        case 1:
          return gather_elements<uint8_t>(src, dst, outer, extent, count, parallel);
        case 2:
          return gather_elements<uint16_t>(src, dst, outer, extent, count, parallel);
        case 4:
          return gather_elements<uint32_t>(src, dst, outer, extent, count, parallel);
        case 8:
          return gather_elements<uint64_t>(src, dst, outer, extent, count, parallel);
        default:
          break;
      }
    }
    auto copy = [&](int64_t o, int64_t j) {
      std::memcpy(dst + static_cast<size_t>(o * count + j) * row_bytes,
                  src + static_cast<size_t>(o * extent + rows[static_cast<size_t>(j)]) * row_bytes,
                  row_bytes);
    };
    if (!parallel) {  // a small lookup: not even a parallel region of one thread
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < count; ++j) copy(o, j);
      return;
    }
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < count; ++j) copy(o, j);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw ExecutionError("Gather node '" + node_.name + "': " + message);
  }

  // Element (o, j) of the output is element rows_[j] of the data's outer row o.
  template <class Element>
  void gather_elements(const uint8_t* src_bytes, uint8_t* dst_bytes, int64_t outer, int64_t extent,
                       int64_t count, bool parallel) const {
    const auto* src = reinterpret_cast<const Element*>(src_bytes);
    auto* dst = reinterpret_cast<Element*>(dst_bytes);
    const int64_t* rows = rows_.data();
    auto gather_row = [&](int64_t o) {
      const Element* from = src + o * extent;
      Element* to = dst + o * count;
      for (int64_t j = 0; j < count; ++j) to[j] = from[rows[j]];
    };
    if (!parallel || outer == 1) {
      for (int64_t o = 0; o < outer; ++o) gather_row(o);
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; ++o) gather_row(o);
  }

  Node node_;
  std::vector<int64_t> rows_;
};

}  // namespace

void register_gather(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "Gather", construct_kernel<GatherKernel>);
}

}  // namespace troupe::kernels::onednn
