// Gather as row copies: output row (o, j) is data row (o, indices[j]) of `inner` elements, any
// element type. Embedding lookups (a table of [vocabulary, width] rows) and the selection of q,
// k and v from a stacked projection (Swin's, timm's ViTs': Gather of one index on axis 0) ran on
// the reference, which copies on one thread: 14.5% of a DLRM's time. Indices are checked once;
// rows are spread over the stream's threads when there is enough to copy.
//
// GatherElements likewise, a row of the indices at a time: DeBERTa's disentangled attention picks
// each query's relative-position scores with it ([B, H, T, 2k] by [B, H, T, T] indices), which the
// reference, unravelling every index into a vector, ran at 0.5 us an element: 66% of a 3-layer
// DeBERTa-like encoder's time.
#include <omp.h>

#include <algorithm>

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

// GatherElements: output element (..., j) is the data element at the same coordinates but for
// the axis, where it is the index's. Rows: every index dimension but the last; a row's elements
// are contiguous in the indices and the output, and (unless the axis is the last dimension) in
// the data too.
class GatherElementsKernel final : public Kernel {
 public:
  explicit GatherElementsKernel(const KernelRequest& r) : node_(r.node) {
    if (r.inputs.size() != 2 || r.outputs.size() != 1 || r.inputs[0].type != r.outputs[0].type ||
        (r.inputs[1].type != ElementType::i64 && r.inputs[1].type != ElementType::i32))
      throw Unsupported{};
    const size_t es = element_size(r.inputs[0].type);
    if (es != 1 && es != 2 && es != 4 && es != 8) throw Unsupported{};  // strings: the reference
  }

  std::string implementation() const override { return "dnnl:gather_elements_rows"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const std::vector<int64_t>& data = in[0].shape().dims();
    const std::vector<int64_t>& index = in[1].shape().dims();
    const auto rank = static_cast<int64_t>(data.size());
    if (static_cast<int64_t>(index.size()) != rank || rank == 0)
      fail("indices must have the rank of data");
    int64_t axis = node_.attributes.get_int_or("axis", 0);
    if (axis < -rank || axis >= rank)
      fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    if (axis < 0) axis += rank;
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && index[static_cast<size_t>(d)] > data[static_cast<size_t>(d)])
        fail("indices shape exceeds data shape");
    if (out[0].size() != in[1].size())
      fail("output has " + std::to_string(out[0].size()) + " elements, expected " +
           std::to_string(in[1].size()));
    if (in[1].size() == 0) return;
    const bool wide = in[1].element_type() == ElementType::i64;
    std::string bad;
    switch (element_size(in[0].element_type())) {
      case 1:
        bad = wide ? gather<uint8_t, int64_t>(in, out, axis)
                   : gather<uint8_t, int32_t>(in, out, axis);
        break;
      case 2:
        bad = wide ? gather<uint16_t, int64_t>(in, out, axis)
                   : gather<uint16_t, int32_t>(in, out, axis);
        break;
      case 4:
        bad = wide ? gather<uint32_t, int64_t>(in, out, axis)
                   : gather<uint32_t, int32_t>(in, out, axis);
        break;
      default:
        bad = wide ? gather<uint64_t, int64_t>(in, out, axis)
                   : gather<uint64_t, int32_t>(in, out, axis);
        break;
    }
    // The request fails: what the output holds by then does not matter.
    if (!bad.empty()) fail(bad);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw ExecutionError("GatherElements node '" + node_.name + "': " + message);
  }

  // What is wrong with an out-of-range index, else nothing.
  template <class Element, class Index>
  static std::string gather(const std::vector<Tensor>& in, std::vector<Tensor>& out, int64_t axis) {
    const std::vector<int64_t>& data = in[0].shape().dims();
    const std::vector<int64_t>& index = in[1].shape().dims();
    const auto rank = static_cast<int64_t>(data.size());
    std::vector<int64_t> strides(data.size());
    for (int64_t d = rank, stride = 1; d-- > 0;) {
      strides[static_cast<size_t>(d)] = stride;
      stride *= data[static_cast<size_t>(d)];
    }
    const int64_t width = index.back();
    const int64_t rows = in[1].size() / width;
    const int64_t extent = data[static_cast<size_t>(axis)];
    const int64_t axis_stride = strides[static_cast<size_t>(axis)];
    const bool last_axis = axis == rank - 1;
    const auto* src = static_cast<const Element*>(in[0].raw_data());
    const auto* indices = static_cast<const Index*>(in[1].raw_data());
    auto* dst = static_cast<Element*>(out[0].raw_data());
    std::vector<int64_t> bad_at;  // per thread: an offending index's position, or -1
    auto gather_rows = [&](int64_t begin, int64_t end, int64_t& bad) {
      // The row's coordinates (the last dimension's excluded), advanced as an odometer.
      std::vector<int64_t> at(data.size(), 0);
      for (int64_t d = rank - 1, rest = begin; d-- > 0;) {
        at[static_cast<size_t>(d)] = rest % index[static_cast<size_t>(d)];
        rest /= index[static_cast<size_t>(d)];
      }
      for (int64_t r = begin; r < end; ++r) {
        int64_t base = 0;  // the row's offset in the data, the axis' coordinate left out
        for (int64_t d = 0; d + 1 < rank; ++d)
          if (d != axis) base += at[static_cast<size_t>(d)] * strides[static_cast<size_t>(d)];
        const Index* t = indices + r * width;
        Element* y = dst + r * width;
        for (int64_t j = 0; j < width; ++j) {
          int64_t i = static_cast<int64_t>(t[j]);
          i += i < 0 ? extent : 0;
          if (i < 0 || i >= extent) {
            bad = r * width + j;
            return;
          }
          y[j] = src[base + i * axis_stride + (last_axis ? 0 : j)];
        }
        for (int64_t d = rank - 1; d-- > 0;) {
          if (++at[static_cast<size_t>(d)] < index[static_cast<size_t>(d)]) break;
          at[static_cast<size_t>(d)] = 0;
        }
      }
    };
    const int threads = in[1].size() >= (int64_t{1} << 15) ? omp_get_max_threads() : 1;
    if (threads > 1 && rows > 1) {
      bad_at.assign(static_cast<size_t>(threads), -1);
#pragma omp parallel num_threads(threads)
      {
        const int team = omp_get_num_threads(), me = omp_get_thread_num();
        gather_rows(rows * me / team, rows * (me + 1) / team, bad_at[static_cast<size_t>(me)]);
      }
    } else {
      bad_at.assign(1, -1);
      gather_rows(0, rows, bad_at[0]);  // no region: libgomp starts a team even for one thread
    }
    for (int64_t bad : bad_at)
      if (bad >= 0)
        return "index " + std::to_string(static_cast<int64_t>(indices[bad])) +
               " is out of range for axis " + std::to_string(axis) + " of size " +
               std::to_string(extent);
    return {};
  }

  Node node_;
};

}  // namespace

void register_gather(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "Gather", construct_kernel<GatherKernel>);
  registry.add(backend_name, backend_priority, "GatherElements",
               construct_kernel<GatherElementsKernel>);
}

}  // namespace troupe::kernels::onednn
