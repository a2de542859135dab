#pragma once

// numpy-style broadcasting by index arithmetic: walk the output in row-major order and keep, for
// every input, the offset of the element that maps to the current output element.

#include <cstdint>
#include <vector>

#include "kernels/reference/common.hpp"
#include "troupe/shape.hpp"

namespace troupe::kernels::reference {

class BroadcastWalker {
 public:
  /// Each input shape must broadcast to `output` (aligned from the right; each dimension equal to
  /// the output's or 1); throws ExecutionError naming the node otherwise.
  BroadcastWalker(const Node& node, const Shape& output, const std::vector<Shape>& inputs)
      : dims_(output.dims()), index_(output.rank(), 0), offsets_(inputs.size(), 0) {
    for (const Shape& in : inputs) {
      if (in.rank() > output.rank())
        fail(node, "input shape " + in.to_string() + " does not broadcast to output shape " +
                       output.to_string());
      const size_t lead = output.rank() - in.rank();
      std::vector<int64_t> strides(output.rank(), 0);
      int64_t stride = 1;
      for (size_t i = in.rank(); i-- > 0;) {
        const int64_t d = in[i];
        if (d != 1 && d != dims_[lead + i])
          fail(node, "input shape " + in.to_string() + " does not broadcast to output shape " +
                         output.to_string());
        // A broadcast dimension repeats the same element: stride 0.
        strides[lead + i] = d == 1 ? 0 : stride;
        stride *= d;
      }
      strides_.push_back(std::move(strides));
    }
  }

  /// Offset, in elements, of input `i`'s element for the current output element.
  int64_t offset(size_t i) const { return offsets_[i]; }

  /// Advances to the next output element (row-major).
  void next() {
    for (size_t d = dims_.size(); d-- > 0;) {
      ++index_[d];
      for (size_t i = 0; i < offsets_.size(); ++i) offsets_[i] += strides_[i][d];
      if (index_[d] < dims_[d]) return;
      for (size_t i = 0; i < offsets_.size(); ++i) offsets_[i] -= strides_[i][d] * dims_[d];
      index_[d] = 0;
    }
  }

 private:
  std::vector<int64_t> dims_;
  std::vector<std::vector<int64_t>> strides_;  // per input, per output dimension
  std::vector<int64_t> index_;
  std::vector<int64_t> offsets_;
};

}  // namespace troupe::kernels::reference
