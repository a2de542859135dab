#include "kernels/dnnl/broadcast_rows.hpp"

namespace troupe::kernels::onednn {

bool BroadcastRows::plan(const std::vector<int64_t>& out, const std::vector<int64_t>& a,
                         const std::vector<int64_t>& b) {
  if (a.size() != out.size() || b.size() != out.size()) return false;
  for (size_t i = 0; i < out.size(); ++i)
    if ((a[i] != out[i] && a[i] != 1) || (b[i] != out[i] && b[i] != 1)) return false;
  size_t rank = out.size();
  const bool a_full = rank > 0 && a[rank - 1] == out[rank - 1];
  const bool b_full = rank > 0 && b[rank - 1] == out[rank - 1];
  a_scalar_ = !a_full;
  b_scalar_ = !b_full;
  // Axes of extent 1 belong to either pattern.
  inner_ = 1;
  while (rank > 0 && (out[rank - 1] == 1 || ((a[rank - 1] == out[rank - 1]) == a_full &&
                                             (b[rank - 1] == out[rank - 1]) == b_full))) {
    inner_ *= out[rank - 1];
    --rank;
  }
  outer_dims_.assign(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(rank));
  a_strides_.assign(rank, 0);
  b_strides_.assign(rank, 0);
  int64_t a_stride = 1, b_stride = 1;
  for (size_t i = out.size(); i-- > 0;) {
    if (i < rank) {
      a_strides_[i] = a[i] == 1 ? 0 : a_stride;
      b_strides_[i] = b[i] == 1 ? 0 : b_stride;
    }
    a_stride *= a[i];
    b_stride *= b[i];
  }
  outer_ = 1;
  for (int64_t d : outer_dims_) outer_ *= d;
  return true;
}

bool plan_broadcast(BroadcastRows& plan, const Shape& a, const Shape& b, const Shape& y) {
  const Dims out = to_dims(y);
  return a.rank() <= y.rank() && b.rank() <= y.rank() &&
         plan.plan(out, pad_front(to_dims(a), out.size()), pad_front(to_dims(b), out.size()));
}

}  // namespace troupe::kernels::onednn
