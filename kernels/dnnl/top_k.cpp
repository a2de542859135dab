// TopK of f32 tensors (i64 and i32 ones below): the k largest (or smallest) elements along an axis,
// sorted, with their indices: each column's k best selected by integer keys in linear time and only
// they sorted, instead of the reference's stable sort of the whole axis (the top 100 of a
// detector's 25200 scores took 2 ms there). Along the innermost axis, where k is small next to the
// axis, a scan that compares whole vectors of the row with the worst of the best k found so far, so
// most elements are rejected 16 at a time, and inserts the others in place (DGCNN's 20 nearest of
// 1024 points per point: 2.9 ms per TopK by partial sort, 2.15 ms so; a CenterNet's top 100 of 1.3
// M heatmap scores, one row split over the threads: 4.2 ms by partial sort). The order is the
// reference's: NaN above every number, equal values by lower index first.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/team.hpp"
#include "kernels/dnnl/vector_exp.hpp"  // TROUPE_ISA_CLONES
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

// NaN above every number, as the reference (and numpy) order it.
bool above(float a, float b) {
  if (std::isnan(a)) return !std::isnan(b);
  if (std::isnan(b)) return false;
  return a > b;
}

using Ranked = std::pair<float, int64_t>;

// An unsigned key that orders as `above` does, from the highest value down: NaN first, then the
// numbers from +inf to -inf, the two zeros alike. With `largest` false the order is from the
// lowest up (NaN last). Shifted up 32 bits with the element's index below, keys are unique and
// ascending keys are the reference's order, ties by lower index first: sorting integers is
// several times faster than sorting pairs by the NaN-aware comparison.
uint64_t rank_key(float value, int64_t index, bool largest) {
  uint32_t bits = 0xFFFFFFFFu;  // NaN: above every number
  if (!std::isnan(value)) {
    const float v = value == 0.f ? 0.f : value;  // -0 ranks as +0
    std::memcpy(&bits, &v, sizeof bits);
    bits = (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;  // ascending with the value
  }
  const uint32_t rank = largest ? ~bits : bits;
  // Smallest first puts NaN last: its key is the highest already.
  return (static_cast<uint64_t>(rank) << 32) | static_cast<uint32_t>(index);
}

// Whether any of x[0..16) could displace `worst` from the best k: beyond it, or NaN. Written
// as a count so that it compiles to two vector compares (a boolean or-reduction does not).
TROUPE_ISA_CLONES bool any_beyond(const float* x, float worst, bool largest) {
  int count = 0;
  if (largest) {
    for (int t = 0; t < 16; ++t) count += (x[t] > worst) | (x[t] != x[t]);
  } else {
    for (int t = 0; t < 16; ++t) count += (x[t] < worst) | (x[t] != x[t]);
  }
  return count != 0;
}

// The best k of row[0..n), best first by `before`, kept sorted while the row is scanned: an
// element better than the worst kept is inserted in place. Blocks of 16 with nothing beyond the
// worst kept are skipped whole. (A NaN worst, which a smallest-first search puts last, takes
// every element to the exact comparison.) Indices are the row's plus `first_index`. Gives up,
// returning false, once the insertions have moved more elements than the row has: a row in
// ascending order inserts every element at the front, which a partial sort does better.
template <class Before>
bool best_of_row(const float* row, int64_t n, int64_t k, int64_t first_index, bool largest,
                 const Before& before, std::vector<Ranked>& kept) {
  kept.clear();
  for (int64_t j = 0; j < k; ++j) kept.emplace_back(row[j], first_index + j);
  std::sort(kept.begin(), kept.end(), before);
  int64_t moves = 0;
  auto offer = [&](int64_t t) {
    const Ranked candidate{row[t], first_index + t};
    if (!before(candidate, kept[static_cast<size_t>(k - 1)])) return;
    auto p = static_cast<size_t>(k - 1);
    for (; p > 0 && before(candidate, kept[p - 1]); --p) kept[p] = kept[p - 1];
    kept[p] = candidate;
    moves += k - static_cast<int64_t>(p);
  };
  int64_t j = k;
  for (; j + 16 <= n; j += 16) {
    const float worst = kept[static_cast<size_t>(k - 1)].first;
    if (worst != worst || any_beyond(row + j, worst, largest))
      for (int64_t t = j; t < j + 16; ++t) offer(t);
    if (moves > n) return false;
  }
  for (; j < n; ++j) offer(j);
  return true;
}

// A TopK's geometry: the axis of n elements split the tensor into outer x n x inner, and K.
struct TopKGeometry {
  int64_t outer = 1, inner = 1, n = 0, k = 0;
};

// Checks the axis, K and the outputs' sizes as the reference does; throws naming the node.
TopKGeometry top_k_geometry(const Node& node, int64_t axis_attribute,
                            const std::vector<int64_t>& dims, const std::vector<Tensor>& in,
                            const std::vector<Tensor>& out) {
  const auto fail = [&](const std::string& message) {
    throw ExecutionError("TopK node '" + node.name + "': " + message);
  };
  const auto rank = static_cast<int64_t>(dims.size());
  const int64_t axis = axis_attribute < 0 ? axis_attribute + rank : axis_attribute;
  if (axis < 0 || axis >= rank) fail("axis " + std::to_string(axis_attribute) + " is out of range");
  if (in.size() < 2 || in[1].size() != 1) fail("K must hold exactly one value");
  TopKGeometry g;
  g.k = static_cast<int64_t>(in[1].value_at(0));
  for (int64_t d = 0; d < axis; ++d) g.outer *= dims[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) g.inner *= dims[static_cast<size_t>(d)];
  g.n = dims[static_cast<size_t>(axis)];
  if (g.k < 0 || g.k > g.n)
    fail("K = " + std::to_string(g.k) + " is out of range for axis size " + std::to_string(g.n));
  if (out.size() != 2 || out[0].size() != g.outer * g.k * g.inner || out[1].size() != out[0].size())
    fail("output shapes do not match K = " + std::to_string(g.k));
  return g;
}

class TopKKernel final : public Kernel {
 public:
  explicit TopKKernel(const KernelRequest& r)
      : node_(r.node),
        axis_(r.node.attributes.get_int_or("axis", -1)),
        largest_(r.node.attributes.get_int_or("largest", 1) != 0) {}
  std::string implementation() const override { return "dnnl:top_k_scan"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const Tensor x = in[0].contiguous();
    const TopKGeometry g = top_k_geometry(node_, axis_, x.shape().dims(), in, out);
    const int64_t outer = g.outer, inner = g.inner, n = g.n, k = g.k;
    if (n > int64_t{0xFFFFFFFF})  // rank_key holds an index in 32 bits
      fail("an axis of " + std::to_string(n) + " elements is more than 2^32 - 1");
    const float* src = x.data<float>();
    float* values = out[0].data<float>();
    int64_t* indices = out[1].data<int64_t>();
    const bool largest = largest_;
    const auto before = [largest](const Ranked& a, const Ranked& b) {
      const bool a_first = largest ? above(a.first, b.first) : above(b.first, a.first);
      const bool b_first = largest ? above(b.first, a.first) : above(a.first, b.first);
      return a_first || (!b_first && a.second < b.second);
    };
    // The scan where most of a row is rejected by vector compares: k a small part of the row, and
    // the insertions a row in random order expects (k ln(n/k) of them, each moving k/2 kept on
    // average) fewer than its elements. (SSDlite's 300 of 3234 per class: a partial sort.)
    const bool scan = inner == 1 && k > 0 && k <= 1024 && k * 8 <= n &&
                      0.5 * static_cast<double>(k * k) *
                              std::log(static_cast<double>(n) / static_cast<double>(k)) <
                          static_cast<double>(n);
    auto store_row = [&](int64_t c, const std::vector<Ranked>& best) {
      for (int64_t j = 0; j < k; ++j) {
        values[c * k + j] = best[static_cast<size_t>(j)].first;
        indices[c * k + j] = best[static_cast<size_t>(j)].second;
      }
    };
    // One long row (a detector's flattened heatmap or score list): each thread scans a part, the
    // parts' best are merged.
    if (scan && outer == 1 && n >= (int64_t{1} << 16) && n / omp_get_max_threads() >= 8 * k &&
        omp_get_max_threads() > 1 && top_of_one_row(src, n, k, largest, before, values, indices))
      return;
    // Selecting and sorting cost ~log2(k) compares an element: a [64, 128] sparsemax sort
    // (180 us) pays for the team where a copy of its size would not.
    const double work = static_cast<double>(x.size()) * std::log2(std::max<double>(2.0, k));
    run_team_if(work > 32768 && outer * inner > 1, [&] {
      std::vector<Ranked> column(static_cast<size_t>(scan ? k : 0));
      std::vector<uint64_t> keys;
#pragma omp for schedule(static)
      for (int64_t c = 0; c < outer * inner; ++c) {
        if (scan && best_of_row(src + c * n, n, k, 0, largest, before, column)) {
          store_row(c, column);
          continue;
        }
        const int64_t o = c / inner, i = c % inner;
        // The k best by their keys: selected in linear time, then only they sorted (TabNet's
        // sparsemax sorts whole rows of 128: 5.3 us a row by a partial sort of pairs).
        keys.resize(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j)
          keys[static_cast<size_t>(j)] = rank_key(src[(o * n + j) * inner + i], j, largest);
        if (k < n) std::nth_element(keys.begin(), keys.begin() + k, keys.end());
        std::sort(keys.begin(), keys.begin() + k);
        for (int64_t j = 0; j < k; ++j) {
          const int64_t at = (o * k + j) * inner + i;
          const int64_t index = static_cast<int64_t>(keys[static_cast<size_t>(j)] & 0xFFFFFFFFu);
          values[at] = src[(o * n + index) * inner + i];
          indices[at] = index;
        }
      }
    });
  }

 private:
  // The best k of one row of n, its parts scanned on the stream's threads; false (nothing
  // written) when a part's scan gave up.
  template <class Before>
  static bool top_of_one_row(const float* row, int64_t n, int64_t k, bool largest,
                             const Before& before, float* values, int64_t* indices) {
    const int team = omp_get_max_threads();
    std::vector<std::vector<Ranked>> parts(static_cast<size_t>(team));
    std::vector<char> done(static_cast<size_t>(team), 0);
#pragma omp parallel for schedule(static, 1) num_threads(team)
    for (int t = 0; t < team; ++t) {
      const int64_t first = n * t / team, last = n * (t + 1) / team;
      done[static_cast<size_t>(t)] = best_of_row(row + first, last - first, k, first, largest,
                                                 before, parts[static_cast<size_t>(t)]);
    }
    if (std::find(done.begin(), done.end(), 0) != done.end()) return false;
    std::vector<Ranked> merged;
    for (const auto& part : parts) merged.insert(merged.end(), part.begin(), part.end());
    std::partial_sort(merged.begin(), merged.begin() + k, merged.end(), before);
    for (int64_t j = 0; j < k; ++j) {
      values[j] = merged[static_cast<size_t>(j)].first;
      indices[j] = merged[static_cast<size_t>(j)].second;
    }
    return true;
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw ExecutionError("TopK node '" + node_.name + "': " + message);
  }

  Node node_;
  int64_t axis_;
  bool largest_;
};

// TopK of i64 or i32 tensors (PointNet++'s ball query takes the 32 lowest of 1024 masked point
// indices for each of 512 centroids: 0.8 ms on the reference's stable sort of every row): each
// column's k best (value, index) pairs selected in linear time, then only they sorted; equal
// values by lower index first, as the reference orders them.
class IntegerTopKKernel final : public Kernel {
 public:
  explicit IntegerTopKKernel(const KernelRequest& r)
      : node_(r.node),
        axis_(r.node.attributes.get_int_or("axis", -1)),
        largest_(r.node.attributes.get_int_or("largest", 1) != 0) {}
  std::string implementation() const override { return "dnnl:top_k_select"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const Tensor x = in[0].contiguous();
    if (x.element_type() == ElementType::i64)
      run(x.data<int64_t>(), x.shape().dims(), in, out, out[0].data<int64_t>());
    else
      run(x.data<int32_t>(), x.shape().dims(), in, out, out[0].data<int32_t>());
  }

 private:
  template <class T>
  void run(const T* src, const std::vector<int64_t>& dims, const std::vector<Tensor>& in,
           std::vector<Tensor>& out, T* values) const {
    const TopKGeometry g = top_k_geometry(node_, axis_, dims, in, out);
    const int64_t outer = g.outer, inner = g.inner, n = g.n, k = g.k;
    int64_t* indices = out[1].data<int64_t>();
    using Pair = std::pair<T, int64_t>;
    const bool largest = largest_;
    const auto before = [largest](const Pair& a, const Pair& b) {
      if (a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
      return a.second < b.second;
    };
    const double work =
        static_cast<double>(outer * n * inner) * std::log2(std::max<double>(2.0, k));
    run_team_if(work > 32768 && outer * inner > 1, [&] {
      std::vector<Pair> column(static_cast<size_t>(n));
#pragma omp for schedule(static)
      for (int64_t c = 0; c < outer * inner; ++c) {
        const int64_t o = c / inner, i = c % inner;
        for (int64_t j = 0; j < n; ++j)
          column[static_cast<size_t>(j)] = {src[(o * n + j) * inner + i], j};
        if (k < n) std::nth_element(column.begin(), column.begin() + k, column.end(), before);
        std::sort(column.begin(), column.begin() + k, before);
        for (int64_t j = 0; j < k; ++j) {
          const int64_t at = (o * k + j) * inner + i;
          values[at] = column[static_cast<size_t>(j)].first;
          indices[at] = column[static_cast<size_t>(j)].second;
        }
      }
    });
  }

  Node node_;
  int64_t axis_;
  bool largest_;
};

std::unique_ptr<Kernel> make_top_k(const KernelRequest& r) {
  // sorted=0 allows any order; the sorted one is as good.
  if (r.inputs.size() != 2 || r.outputs.size() != 2 || r.input_layout(0) != TensorLayout{})
    return nullptr;
  const ElementType type = r.inputs[0].type;
  if (type == ElementType::f32) return std::make_unique<TopKKernel>(r);
  if (type == ElementType::i64 || type == ElementType::i32)
    return std::make_unique<IntegerTopKKernel>(r);
  return nullptr;
}

}  // namespace

void register_top_k(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "TopK", make_top_k);
}

}  // namespace troupe::kernels::onednn
