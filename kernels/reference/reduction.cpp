// Reference kernels of the ops that work along axes: ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/
// LogSum/LogSumExp, ArgMax/ArgMin, TopK and CumSum.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/reference/common.hpp"
#include "kernels/reference/element_types.hpp"
#include "kernels/reference/reduction.hpp"
#include "kernels/reference/reference.hpp"

namespace troupe::kernels::reference {

std::vector<bool> reduced_dims(const Node& node, const std::vector<Tensor>& in, size_t rank) {
  std::vector<int64_t> axes;
  if (node.attributes.has("axes"))
    axes = node.attributes.get_ints("axes");
  else if (in.size() > 1 && !in[1].empty())
    axes = read_ints(node, in[1], "axes");
  const bool noop = node.attributes.get_int_or("noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduced(rank, axes.empty() && !noop);
  for (int64_t a : axes) reduced[normalize_axis(node, a, rank)] = true;
  return reduced;
}

namespace {

using Tensors = std::vector<Tensor>;

enum class Reduction { sum, mean, max, min, prod, l1, l2, sum_square, log_sum, log_sum_exp };

void reduce(const Node& node, const Tensors& in, Tensors& out, Reduction kind) {
  dispatch_numeric(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const std::vector<int64_t>& dims = in[0].shape().dims();
    const std::vector<bool> reduced = reduced_dims(node, in, dims.size());

    // Input element at multi-index idx lands in the output element at idx with the reduced
    // dimensions set to 0: strides of the keepdims shape, 0 on reduced dimensions.
    std::vector<int64_t> kept_dims = dims;
    int64_t group = 1;  // input elements per output element
    for (size_t d = 0; d < dims.size(); ++d) {
      if (reduced[d]) {
        kept_dims[d] = 1;
        group *= dims[d];
      }
    }
    std::vector<int64_t> out_strides = dense_strides(kept_dims);
    for (size_t d = 0; d < dims.size(); ++d)
      if (reduced[d]) out_strides[d] = 0;
    if (out[0].size() != element_count(kept_dims))
      fail(node, "output shape " + out[0].shape().to_string() + " does not match reducing " +
                     in[0].shape().to_string());
    // Visits the input in order with each element's output index, kept by an odometer over the
    // multi-index (unravelling every flat index took ~10 ns an element).
    auto for_each_target = [&](auto&& visit) {
      std::vector<int64_t> index(dims.size(), 0);
      int64_t o = 0;
      const int64_t count = in[0].size();
      for (int64_t i = 0; i < count; ++i) {
        visit(i, o);
        for (size_t d = dims.size(); d-- > 0;) {
          o += out_strides[d];
          if (++index[d] < dims[d]) break;
          o -= out_strides[d] * dims[d];
          index[d] = 0;
        }
      }
    };

    const C lowest = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                          : std::numeric_limits<C>::lowest();
    const C highest = std::numeric_limits<C>::has_infinity ? std::numeric_limits<C>::infinity()
                                                           : std::numeric_limits<C>::max();
    C init = 0;
    if (kind == Reduction::max || kind == Reduction::log_sum_exp) init = lowest;
    if (kind == Reduction::min) init = highest;
    if (kind == Reduction::prod) init = 1;
    std::vector<C> acc(static_cast<size_t>(out[0].size()), init);

    const T* x = in[0].data<T>();
    if (kind == Reduction::log_sum_exp) {
      // log(sum(exp(x))) = m + log(sum(exp(x - m))) with m the maximum, so exp cannot overflow.
      std::vector<C> max = acc;
      for_each_target([&](int64_t i, int64_t o) { max[o] = max_of(max[o], load(x[i])); });
      std::vector<double> sums(acc.size(), 0.0);
      for_each_target([&](int64_t i, int64_t o) {
        sums[o] += std::exp(static_cast<double>(load(x[i])) - static_cast<double>(max[o]));
      });
      for (size_t o = 0; o < acc.size(); ++o) {
        const double m = static_cast<double>(max[o]);
        acc[o] = std::isinf(m) ? max[o] : static_cast<C>(m + std::log(sums[o]));
      }
    } else {
      for_each_target([&](int64_t i, int64_t o) {
        const C v = load(x[i]);
        C& a = acc[static_cast<size_t>(o)];
        switch (kind) {
          case Reduction::sum:
          case Reduction::mean:
          case Reduction::log_sum:
            a += v;
            break;
          case Reduction::max:
            a = max_of(a, v);
            break;
          case Reduction::min:
            a = min_of(a, v);
            break;
          case Reduction::prod:
            a *= v;
            break;
          case Reduction::l1:
            a += v < 0 ? -v : v;
            break;
          case Reduction::l2:
          case Reduction::sum_square:
            a += v * v;
            break;
          case Reduction::log_sum_exp:
            break;
        }
      });
      for (C& a : acc) {
        if (kind == Reduction::mean && group > 0) a = a / static_cast<C>(group);
        if (kind == Reduction::l2) a = static_cast<C>(std::sqrt(static_cast<double>(a)));
        if (kind == Reduction::log_sum) a = static_cast<C>(std::log(static_cast<double>(a)));
      }
    }
    T* y = out[0].data<T>();
    for (size_t o = 0; o < acc.size(); ++o) y[o] = store<T>(acc[o]);
  });
}

void reduce_sum(const Node& n, const Tensors& in, Tensors& out) {
  reduce(n, in, out, Reduction::sum);
}
void reduce_mean(const Node& n, const Tensors& in, Tensors& out) {
  reduce(n, in, out, Reduction::mean);
}
void reduce_max(const Node& n, const Tensors& in, Tensors& out) {
  reduce(n, in, out, Reduction::max);
}
void reduce_min(const Node& n, const Tensors& in, Tensors& out) {
  reduce(n, in, out, Reduction::min);
}
void reduce_prod(const Node& n, const Tensors& in, Tensors& out) {
  reduce(n, in, out, Reduction::prod);
}
void reduce_l1(const Node& n, const Tensors& in, Tensors& out) {
  reduce(n, in, out, Reduction::l1);
}
void reduce_l2(const Node& n, const Tensors& in, Tensors& out) {
  reduce(n, in, out, Reduction::l2);
}
void reduce_sum_square(const Node& n, const Tensors& in, Tensors& out) {
  reduce(n, in, out, Reduction::sum_square);
}
void reduce_log_sum(const Node& n, const Tensors& in, Tensors& out) {
  reduce(n, in, out, Reduction::log_sum);
}
void reduce_log_sum_exp(const Node& n, const Tensors& in, Tensors& out) {
  reduce(n, in, out, Reduction::log_sum_exp);
}

// Sizes before the axis, of the axis and after it.
struct AxisSplit {
  int64_t outer = 1;
  int64_t n = 1;
  int64_t inner = 1;
};

AxisSplit split_at(const std::vector<int64_t>& dims, size_t axis) {
  AxisSplit s;
  for (size_t d = 0; d < axis; ++d) s.outer *= dims[d];
  s.n = dims[axis];
  for (size_t d = axis + 1; d < dims.size(); ++d) s.inner *= dims[d];
  return s;
}

// Index of the largest (or smallest) element along the axis; ties go to the first occurrence,
// or the last with select_last_index=1. NaN never wins a comparison.
void arg_reduce(const Node& node, const Tensors& in, Tensors& out, bool largest) {
  dispatch_numeric(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::vector<int64_t>& dims = in[0].shape().dims();
    const size_t axis = normalize_axis(node, node.attributes.get_int_or("axis", 0), dims.size());
    const bool last = node.attributes.get_int_or("select_last_index", 0) != 0;
    const AxisSplit s = split_at(dims, axis);
    if (s.n == 0) fail(node, "cannot take the arg-extremum of an empty axis");
    if (out[0].size() != s.outer * s.inner) fail(node, "output shape does not match the input");
    const T* x = in[0].data<T>();
    int64_t* y = out[0].data<int64_t>();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        auto at = [&](int64_t k) { return load(x[(o * s.n + k) * s.inner + i]); };
        int64_t best = 0;
        for (int64_t k = 1; k < s.n; ++k) {
          const bool better = largest ? at(k) > at(best) : at(k) < at(best);
          if (better || (last && at(k) == at(best))) best = k;
        }
        y[o * s.inner + i] = best;
      }
    }
  });
}

void arg_max(const Node& n, const Tensors& in, Tensors& out) {
  arg_reduce(n, in, out, true);
}
void arg_min(const Node& n, const Tensors& in, Tensors& out) {
  arg_reduce(n, in, out, false);
}

// A strict order in which NaN is above every number (as numpy sorts it).
template <class C>
bool greater(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a > b;
}

// The K largest (or smallest) elements along the axis, sorted, with their indices; equal values
// keep their original order (lower index first).
void top_k(const Node& node, const Tensors& in, Tensors& out) {
  dispatch_numeric(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::vector<int64_t>& dims = in[0].shape().dims();
    const size_t axis = normalize_axis(node, node.attributes.get_int_or("axis", -1), dims.size());
    const bool largest = node.attributes.get_int_or("largest", 1) != 0;
    const std::vector<int64_t> k_values = in.size() > 1
                                              ? read_ints(node, in[1], "K")
                                              : std::vector<int64_t>{node.attributes.get_int("k")};
    if (k_values.size() != 1) fail(node, "K must hold exactly one value");
    const int64_t k = k_values[0];
    const AxisSplit s = split_at(dims, axis);
    if (k < 0 || k > s.n)
      fail(node,
           "K = " + std::to_string(k) + " is out of range for axis size " + std::to_string(s.n));
    if (out[0].size() != s.outer * k * s.inner || out[1].size() != out[0].size())
      fail(node, "output shapes do not match K = " + std::to_string(k));

    const T* x = in[0].data<T>();
    T* values = out[0].data<T>();
    int64_t* indices = out[1].data<int64_t>();
    std::vector<std::pair<compute_t<T>, int64_t>> column(static_cast<size_t>(s.n));
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        for (int64_t j = 0; j < s.n; ++j)
          column[static_cast<size_t>(j)] = {load(x[(o * s.n + j) * s.inner + i]), j};
        std::stable_sort(column.begin(), column.end(), [largest](const auto& a, const auto& b) {
          return largest ? greater(a.first, b.first) : greater(b.first, a.first);
        });
        for (int64_t j = 0; j < k; ++j) {
          const int64_t dst = (o * k + j) * s.inner + i;
          values[dst] = store<T>(column[static_cast<size_t>(j)].first);
          indices[dst] = column[static_cast<size_t>(j)].second;
        }
      }
    }
  });
}

// Running sums along an axis given as a scalar input; `exclusive` leaves the current element out,
// `reverse` runs from the end.
void cum_sum(const Node& node, const Tensors& in, Tensors& out) {
  dispatch_numeric(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::vector<int64_t>& dims = in[0].shape().dims();
    const std::vector<int64_t> axis_value = read_ints(node, in[1], "axis");
    if (axis_value.size() != 1) fail(node, "axis must hold exactly one value");
    const size_t axis = normalize_axis(node, axis_value[0], dims.size());
    const bool exclusive = node.attributes.get_int_or("exclusive", 0) != 0;
    const bool reverse = node.attributes.get_int_or("reverse", 0) != 0;
    const AxisSplit s = split_at(dims, axis);
    require_output_size(node, out[0], in[0].size());
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        compute_t<T> acc = 0;
        for (int64_t step = 0; step < s.n; ++step) {
          const int64_t k = reverse ? s.n - 1 - step : step;
          const int64_t at = (o * s.n + k) * s.inner + i;
          const compute_t<T> v = load(x[at]);
          if (!exclusive) acc += v;
          y[at] = store<T>(acc);
          if (exclusive) acc += v;
        }
      }
    }
  });
}

}  // namespace

void register_reduction(KernelRegistry& registry) {
  const std::vector<std::pair<const char*, ReferenceFn>> ops = {
      {"ReduceSum", &reduce_sum},
      {"ReduceMean", &reduce_mean},
      {"ReduceMax", &reduce_max},
      {"ReduceMin", &reduce_min},
      {"ReduceProd", &reduce_prod},
      {"ReduceL1", &reduce_l1},
      {"ReduceL2", &reduce_l2},
      {"ReduceSumSquare", &reduce_sum_square},
      {"ReduceLogSum", &reduce_log_sum},
      {"ReduceLogSumExp", &reduce_log_sum_exp},
      {"CumSum", &cum_sum},
      {"ArgMax", &arg_max},
      {"ArgMin", &arg_min},
      {"TopK", &top_k},
  };
  for (const auto& [op_type, fn] : ops) {
    ReferenceFn f = fn;
    registry.add("reference", 0, op_type,
                 [f](const KernelRequest& r) { return make_reference_kernel(r.node, f); });
  }
}

}  // namespace troupe::kernels::reference
