// ScatterElements (and opset 9's Scatter) and ScatterND on f32 data.
//
// ScatterElements: graph networks aggregate messages with it (PyTorch's scatter_add / index_add,
// `reduction` add), and the reference, which unravels every
// index into a vector and compares the reduction's name per element in double, took 80% of a
// 3-layer GCN's time (420 ms for 4 nodes on 10^4 edges x 256 features). Here the indices are
// checked once, each row of the last index dimension is walked with one base offset, and rows
// are split over the stream's threads by a coordinate other than the axis, so that no two
// threads ever update the same element and repeated indices apply in index order, as the
// reference does (with reduction none, the last one wins).
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "troupe/error.hpp"
#include "troupe/shape.hpp"

namespace troupe::kernels::onednn {

namespace {

enum class Reduction { none, add, mul, max, min };

// As the reference combines (in double, then rounded: the same float for one operation, NaN
// kept where std::max / std::min keep it).
template <Reduction R>
inline void combine(float& target, float update) {
  if constexpr (R == Reduction::add)
    target += update;
  else if constexpr (R == Reduction::mul)
    target *= update;
  else if constexpr (R == Reduction::max)
    target = target < update ? update : target;
  else if constexpr (R == Reduction::min)
    target = update < target ? update : target;
  else
    target = update;
}

// Data, updates and output f32; indices i64 (or i32 where `narrow_indices`).
bool f32_scatter(const KernelRequest& r, bool narrow_indices) {
  const ElementType index = r.inputs.size() == 3 ? r.inputs[1].type : ElementType::undefined;
  return r.inputs.size() == 3 && r.inputs[0].type == ElementType::f32 &&
         r.inputs[2].type == ElementType::f32 && r.outputs[0].type == ElementType::f32 &&
         (index == ElementType::i64 || (narrow_indices && index == ElementType::i32));
}

Reduction reduction_named(const std::string& reduction) {
  if (reduction == "add") return Reduction::add;
  if (reduction == "mul") return Reduction::mul;
  if (reduction == "max") return Reduction::max;
  if (reduction == "min") return Reduction::min;
  if (reduction == "none") return Reduction::none;
  throw Unsupported{};  // the reference names the bad value
}

class ScatterElementsKernel final : public Kernel {
 public:
  explicit ScatterElementsKernel(const KernelRequest& r) : node_(r.node) {
    if (!f32_scatter(r, true)) throw Unsupported{};
    reduction_ = reduction_named(r.node.attributes.get_string_or("reduction", "none"));
  }

  std::string implementation() const override { return "dnnl:scatter_rows"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const std::vector<int64_t>& data = in[0].shape().dims();
    const std::vector<int64_t>& index = in[1].shape().dims();
    const size_t rank = data.size();
    if (index.size() != rank || in[2].shape().dims() != index || out[0].size() != in[0].size() ||
        rank == 0)
      fail("indices " + in[1].shape().to_string() + " and updates " + in[2].shape().to_string() +
           " must have one shape, of data " + in[0].shape().to_string() + "'s rank");
    int64_t axis_attr = node_.attributes.get_int_or("axis", 0);
    if (axis_attr < -static_cast<int64_t>(rank) || axis_attr >= static_cast<int64_t>(rank))
      fail("axis " + std::to_string(axis_attr) + " is out of range for rank " +
           std::to_string(rank));
    const auto axis =
        static_cast<size_t>(axis_attr < 0 ? axis_attr + static_cast<int64_t>(rank) : axis_attr);
    for (size_t d = 0; d < rank; ++d)
      if (d != axis && index[d] > data[d])
        fail("indices " + in[1].shape().to_string() + " exceed data " + in[0].shape().to_string() +
             " in dimension " + std::to_string(d));
    float* y = out[0].data<float>();
    if (y != in[0].data<float>())
      std::memcpy(y, in[0].data<float>(), static_cast<size_t>(in[0].size()) * sizeof(float));
    if (in[1].size() == 0) return;
    const bool wide = in[1].element_type() == ElementType::i64;
    int64_t bad = 0;
    auto with = [&](auto reduction) {
      constexpr Reduction R = decltype(reduction)::value;
      return wide ? scatter<R, int64_t>(in, y, axis, bad) : scatter<R, int32_t>(in, y, axis, bad);
    };
    using std::integral_constant;
    const bool ok =
        reduction_ == Reduction::add   ? with(integral_constant<Reduction, Reduction::add>{})
        : reduction_ == Reduction::mul ? with(integral_constant<Reduction, Reduction::mul>{})
        : reduction_ == Reduction::max ? with(integral_constant<Reduction, Reduction::max>{})
        : reduction_ == Reduction::min ? with(integral_constant<Reduction, Reduction::min>{})
                                       : with(integral_constant<Reduction, Reduction::none>{});
    // The request fails: what the output holds by then does not matter.
    if (!ok)
      fail("index " + std::to_string(bad) + " is out of range for axis " + std::to_string(axis) +
           " of size " + std::to_string(in[0].shape().dims()[axis]));
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw ExecutionError(node_.op_type + " node '" + node_.name + "': " + message);
  }

  // Rows: every index dimension but the last; a row's elements are contiguous in the indices and
  // updates, and (unless the axis is the last dimension) in the data too.
  // Returns false, with an offending index in `bad`, when an index is out of range (checked as
  // it is read: one pass over the indices, which can be as large as the updates).
  template <Reduction R, class Index>
  static bool scatter(const std::vector<Tensor>& in, float* y, size_t axis, int64_t& bad) {
    const std::vector<int64_t>& data = in[0].shape().dims();
    const std::vector<int64_t>& index = in[1].shape().dims();
    const size_t rank = data.size();
    std::vector<int64_t> strides(rank);
    int64_t stride = 1;
    for (size_t d = rank; d-- > 0;) {
      strides[d] = stride;
      stride *= data[d];
    }
    const int64_t width = index[rank - 1];
    const int64_t rows = in[1].size() / width;
    const bool last_axis = axis == rank - 1;
    const float* updates = in[2].data<float>();
    const Index* indices = in[1].data<Index>();
    const int64_t extent = data[axis];
    bool failed = false;
    // Threads split a coordinate other than the axis: the first dimension, or (the axis being
    // the first) the columns of the last. Either way no element has two writers.
    const int threads = in[1].size() >= (int64_t{1} << 14) ? omp_get_max_threads() : 1;
    const bool split_rows = axis != 0;
    const bool split_columns = !split_rows && rank > 1;
    const int64_t first = index[0];
    const int64_t per_first = rows / std::max<int64_t>(first, 1);
    auto scatter = [&] {
      const int team = omp_get_num_threads(), me = omp_get_thread_num();
      int64_t row_begin = 0, row_end = rows, col_begin = 0, col_end = width;
      if (team > 1 && split_rows) {
        row_begin = first * me / team * per_first;
        row_end = first * (me + 1) / team * per_first;
      } else if (team > 1) {
        col_begin = width * me / team;
        col_end = width * (me + 1) / team;
      }
      // The row's coordinates (the last dimension's excluded), advanced as an odometer.
      std::vector<int64_t> at(rank, 0);
      int64_t rest = row_begin;
      for (size_t d = rank - 1; d-- > 0;) {
        at[d] = rest % index[d];
        rest /= index[d];
      }
      bool stop = false;  // this thread met a bad index
      for (int64_t r = row_begin; r < row_end && !stop; ++r) {
        int64_t base = 0;  // the row's offset in the data, the axis' coordinate left out
        for (size_t d = 0; d + 1 < rank; ++d)
          if (d != axis) base += at[d] * strides[d];
        const Index* t = indices + r * width;
        const float* u = updates + r * width;
        const int64_t step = last_axis ? 1 : strides[axis];
        const int64_t column = last_axis ? 0 : 1;
        for (int64_t j = col_begin; j < col_end; ++j) {
          int64_t target = static_cast<int64_t>(t[j]);
          target += target < 0 ? extent : 0;
          if (target < 0 || target >= extent) {
#pragma omp critical
            {
              failed = true;
              bad = static_cast<int64_t>(t[j]);
            }
            stop = true;
            break;
          }
          combine<R>(y[base + target * step + j * column], u[j]);
        }
        for (size_t d = rank - 1; d-- > 0;) {
          if (++at[d] < index[d]) break;
          at[d] = 0;
        }
      }
    };
    if (threads > 1 && (split_rows || split_columns)) {
#pragma omp parallel num_threads(threads)
      scatter();
    } else {
      scatter();  // no region: libgomp starts a team even for one thread (kernels/dnnl/team.hpp)
    }
    return !failed;
  }

  Node node_;
  Reduction reduction_ = Reduction::none;
};

// ScatterND with each index tuple addressing a slice of whole rows: graph networks' index_add and
// (after the graph rewrite in engine/graph/transformations/row_scatter.cpp) PyTorch Geometric's
// scatter of messages by an index expanded over the feature columns. A slice is contiguous in
// the data and the updates, so each tuple is checked once and its slice combined in one
// vectorisable loop; threads split the slice's columns, so repeated tuples still apply in index
// order with no element written by two threads.
class ScatterNdKernel final : public Kernel {
 public:
  explicit ScatterNdKernel(const KernelRequest& r) : node_(r.node) {
    if (!f32_scatter(r, false)) throw Unsupported{};  // ONNX's ScatterND indices are int64
    reduction_ = reduction_named(r.node.attributes.get_string_or("reduction", "none"));
  }

  std::string implementation() const override { return "dnnl:scatter_slices"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const std::vector<int64_t>& data = in[0].shape().dims();
    const std::vector<int64_t>& index = in[1].shape().dims();
    const std::vector<int64_t>& updates = in[2].shape().dims();
    const size_t k = index.empty() ? 0 : static_cast<size_t>(index.back());
    if (index.empty() || k < 1 || k > data.size() || out[0].size() != in[0].size())
      fail("indices " + in[1].shape().to_string() + " do not address data " +
           in[0].shape().to_string());
    // updates = indices.shape[:-1] + data.shape[k:]
    std::vector<int64_t> expected(index.begin(), index.end() - 1);
    expected.insert(expected.end(), data.begin() + static_cast<std::ptrdiff_t>(k), data.end());
    if (updates != expected)
      fail("updates " + in[2].shape().to_string() + " must have the shape " +
           Shape(expected).to_string() + " (indices " + in[1].shape().to_string() + ", data " +
           in[0].shape().to_string() + ")");
    float* y = out[0].data<float>();
    if (y != in[0].data<float>())
      std::memcpy(y, in[0].data<float>(), static_cast<size_t>(in[0].size()) * sizeof(float));
    if (in[2].size() == 0) return;
    const std::string bad = reduction_ == Reduction::add   ? scatter<Reduction::add>(in, y, k)
                            : reduction_ == Reduction::mul ? scatter<Reduction::mul>(in, y, k)
                            : reduction_ == Reduction::max ? scatter<Reduction::max>(in, y, k)
                            : reduction_ == Reduction::min ? scatter<Reduction::min>(in, y, k)
                                                           : scatter<Reduction::none>(in, y, k);
    // The request fails: what the output holds by then does not matter.
    if (!bad.empty()) fail(bad);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw ExecutionError(node_.op_type + " node '" + node_.name + "': " + message);
  }

  // Returns what is wrong with an out-of-range index when one is met, else nothing. Every tuple is
  // checked before any slice is combined, outside the threads' loops.
  template <Reduction R>
  static std::string scatter(const std::vector<Tensor>& in, float* y, size_t k) {
    const std::vector<int64_t>& data = in[0].shape().dims();
    const int64_t tuples = in[1].size() / static_cast<int64_t>(k);
    int64_t slice = 1;
    for (size_t d = k; d < data.size(); ++d) slice *= data[d];
    std::vector<int64_t> strides(k);
    for (size_t d = k; d-- > 0;) strides[d] = d + 1 == k ? slice : strides[d + 1] * data[d + 1];
    const int64_t* indices = in[1].data<int64_t>();
    std::vector<int64_t> offsets(static_cast<size_t>(tuples));
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = 0;
      for (size_t d = 0; d < k; ++d) {
        const int64_t raw = indices[t * static_cast<int64_t>(k) + static_cast<int64_t>(d)];
        const int64_t i = raw < 0 ? raw + data[d] : raw;
        if (i < 0 || i >= data[d])
          return "index " + std::to_string(raw) + " is out of range for axis " + std::to_string(d) +
                 " of size " + std::to_string(data[d]);
        offset += i * strides[d];
      }
      offsets[static_cast<size_t>(t)] = offset;
    }
    const float* updates = in[2].data<float>();
    // Columns split in multiples of 16 floats (a cache line), so no two threads share one.
    const int64_t lines = (slice + 15) / 16;
    const int threads =
        in[2].size() >= (int64_t{1} << 15) ? std::min<int64_t>(omp_get_max_threads(), lines) : 1;
    auto combine_columns = [&](int64_t begin, int64_t end) {
      for (int64_t t = 0; t < tuples; ++t) {
        float* target = y + offsets[static_cast<size_t>(t)];
        const float* u = updates + t * slice;
        for (int64_t j = begin; j < end; ++j) combine<R>(target[j], u[j]);
      }
    };
    if (threads > 1) {
#pragma omp parallel num_threads(threads)
      {
        const int team = omp_get_num_threads(), me = omp_get_thread_num();
        combine_columns(std::min(slice, lines * me / team * 16),
                        std::min(slice, lines * (me + 1) / team * 16));
      }
    } else {
      combine_columns(0, slice);  // no region: libgomp starts a team even for one thread
    }
    return {};
  }

  Node node_;
  Reduction reduction_ = Reduction::none;
};

}  // namespace

void register_scatter(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "ScatterElements",
               construct_kernel<ScatterElementsKernel>);
  registry.add(backend_name, backend_priority, "Scatter", construct_kernel<ScatterElementsKernel>);
  registry.add(backend_name, backend_priority, "ScatterND", construct_kernel<ScatterNdKernel>);
}

}  // namespace troupe::kernels::onednn
