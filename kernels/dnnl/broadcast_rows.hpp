// Two operands broadcast into an output as rows: the innermost output axes along which each
// operand keeps one pattern (advancing with the output, or one value for the whole row) form a
// contiguous row, and the outer axes index each operand through its broadcast strides. The
// element-wise kernels (sums and products, comparisons, logical ops) run one tight loop per row
// instead of walking every element through all its axes.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/dnnl/chunked_loop.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/team.hpp"

namespace troupe::kernels::onednn {

class BroadcastRows {
 public:
  /// Plans output dims `out` from operand dims `a` and `b` of the same rank, each axis equal to
  /// the output's or 1. False when they do not broadcast so.
  bool plan(const std::vector<int64_t>& out, const std::vector<int64_t>& a,
            const std::vector<int64_t>& b);

  /// Elements per row, and rows.
  int64_t inner() const { return inner_; }
  int64_t outer() const { return outer_; }
  /// Whether operand a (b) is one value for each row rather than a row of its own.
  bool a_scalar() const { return a_scalar_; }
  bool b_scalar() const { return b_scalar_; }

  /// Calls row(o, a_offset, b_offset) for the rows o in [begin, end), with the element offsets of
  /// each operand's first value for that row (an odometer over the outer axes: a division per
  /// axis and row cost more than rows of a few elements).
  template <class Row>
  void for_rows(int64_t begin, int64_t end, const Row& row) const {
    const size_t rank = outer_dims_.size();
    std::vector<int64_t> index(rank, 0);
    int64_t ao = 0, bo = 0, rest = begin;
    for (size_t d = rank; d-- > 0;) {
      index[d] = rest % outer_dims_[d];
      rest /= outer_dims_[d];
      ao += index[d] * a_strides_[d];
      bo += index[d] * b_strides_[d];
    }
    for (int64_t o = begin; o < end; ++o) {
      row(o, ao, bo);
      for (size_t d = rank; d-- > 0;) {
        ao += a_strides_[d];
        bo += b_strides_[d];
        if (++index[d] < outer_dims_[d]) break;
        ao -= a_strides_[d] * outer_dims_[d];
        bo -= b_strides_[d] * outer_dims_[d];
        index[d] = 0;
      }
    }
  }

  /// Calls row(o, a_offset, b_offset, begin, count) for the elements [begin, begin + count) of
  /// every row o, shared among the calling thread's OpenMP team when the output has a few hundred
  /// thousand elements and more (fewer do not pay for the region's start): whole rows, or pieces
  /// of the one row of operands that do not broadcast (or broadcast one value).
  template <class Row>
  void for_all_rows(const Row& row) const {
    constexpr int64_t split_from = int64_t{1} << 18;
    if (outer_ == 1) {
      for_each_chunk(inner_, split_from / 4,
                     [&](int64_t begin, int64_t count) { row(0, 0, 0, begin, count); });
      return;
    }
    run_team_if(outer_ * inner_ > split_from, [&] {
      const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
      for_rows(outer_ * thread / threads, outer_ * (thread + 1) / threads,
               [&](int64_t o, int64_t ao, int64_t bo) { row(o, ao, bo, 0, inner_); });
    });
  }

 private:
  int64_t inner_ = 1;
  int64_t outer_ = 1;
  bool a_scalar_ = false;
  bool b_scalar_ = false;
  std::vector<int64_t> outer_dims_;
  std::vector<int64_t> a_strides_;  // per outer axis; 0 where a is broadcast
  std::vector<int64_t> b_strides_;  // per outer axis; 0 where b is broadcast
};

/// y = op(a, b) element by element, as `plan` broadcasts a and b into y.
template <class A, class B, class Y, class Op>
void compute_rows(const BroadcastRows& plan, const A* a, const B* b, Y* y, Op op) {
  const int64_t inner = plan.inner();
  const bool a_scalar = plan.a_scalar(), b_scalar = plan.b_scalar();
  plan.for_all_rows([&](int64_t o, int64_t ao, int64_t bo, int64_t begin, int64_t count) {
    Y* yr = y + o * inner + begin;
    const A* ar = a + ao + (a_scalar ? 0 : begin);
    const B* br = b + bo + (b_scalar ? 0 : begin);
    if (!a_scalar && !b_scalar) {
      for (int64_t i = 0; i < count; ++i) yr[i] = op(ar[i], br[i]);
    } else if (!a_scalar) {
      const B t = *br;
      for (int64_t i = 0; i < count; ++i) yr[i] = op(ar[i], t);
    } else if (!b_scalar) {
      const A t = *ar;
      for (int64_t i = 0; i < count; ++i) yr[i] = op(t, br[i]);
    } else {
      const Y v = op(*ar, *br);
      for (int64_t i = 0; i < count; ++i) yr[i] = v;
    }
  });
}

/// The row plan of a broadcast from the operands' shapes into the output's (ONNX's
/// multidirectional broadcast: the lower rank padded with leading 1s).
bool plan_broadcast(BroadcastRows& plan, const Shape& a, const Shape& b, const Shape& y);

/// A two-input op over broadcast operands: plans its rows for the request's static shapes, or at
/// the first run and whenever the shapes change; shapes it cannot plan run the reference.
class BroadcastKernel : public Kernel {
 public:
  explicit BroadcastKernel(const KernelRequest& request) {
    const auto& in = request.inputs;
    if (in.size() != 2 || request.outputs.size() != 1 || !request.input_layout(0).is_plain() ||
        !request.input_layout(1).is_plain() || !request.output_layout(0).is_plain())
      throw Unsupported{};
    const Shape& y = request.outputs[0].shape;
    if (in[0].shape.is_static() && in[1].shape.is_static() && y.is_static()) {
      if (!plan_broadcast(plan_, in[0].shape, in[1].shape, y)) throw Unsupported{};
      planned_for_ = {in[0].shape, in[1].shape};
    }
    fallback_ = KernelRegistry::instance().create_with("reference", request);
    if (!fallback_) throw Unsupported{};
  }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const std::vector<Shape> shapes = {in[0].shape(), in[1].shape()};
    if (shapes != planned_for_) {
      planned_for_.clear();
      if (!plan_broadcast(plan_, shapes[0], shapes[1], out[0].shape()))
        return fallback_->execute(in, out);
      planned_for_ = shapes;
    }
    if (out[0].size() == 0) return;
    run(plan_, in[0].contiguous(), in[1].contiguous(), out[0]);
  }

 protected:
  virtual void run(const BroadcastRows& plan, const Tensor& a, const Tensor& b, Tensor& y) = 0;

 private:
  BroadcastRows plan_;
  std::vector<Shape> planned_for_;    // the operand shapes plan_ is for; empty: none
  std::unique_ptr<Kernel> fallback_;  // shapes that do not broadcast so
};

/// Add, Sub, Mul, Div, Max or Min of i64 or i32 tensors as rows (integer_arithmetic.cpp), or
/// nullptr for other types.
std::unique_ptr<Kernel> make_integer_arithmetic(const KernelRequest& request);

}  // namespace troupe::kernels::onednn
