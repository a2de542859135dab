#include "kernels/dnnl/small_rows_product.hpp"

#include <omp.h>
#include <dnnl.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu_isa.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

typedef float Vec16 __attribute__((vector_size(64)));

// Everything passing vectors is inlined into the per-ISA copies below, so the vector ABI GCC
// warns about (-Wpsabi) is never used at a call.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
[[gnu::always_inline]] inline Vec16 load_vector(const float* p) {
  Vec16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// y[i][columns of panels first..last) += x[i][0:k] x B for the M rows of x (1 or 2; row i of x at
// x + i * k, of y at y + i * n), B packed in panels of 64 columns ([panel][k][64], the last one
// zero-padded). A panel's 64 sums stay in registers over all of k while its weights stream in
// order: no pass over y per few rows of B, one stream the prefetchers follow. One row of x keeps
// two sets of sums (even and odd k), two rows one set each, so that eight independent chains of
// FMAs hide their latency.
template <int M>
[[gnu::always_inline]] inline void add_panel_products(const float* __restrict x, int64_t k,
                                                      const float* __restrict panels, int64_t first,
                                                      int64_t last, float* __restrict y,
                                                      int64_t n) {
  constexpr int64_t W = SmallRowsProduct::panel_width;
  constexpr int P = M == 1 ? 2 : 1;
  const Vec16 zero = {};
  for (int64_t panel = first; panel < last; ++panel) {
    const float* w = panels + panel * k * W;
    Vec16 acc[M][P][4];
    for (int r = 0; r < M; ++r)
      for (int q = 0; q < P; ++q)
        for (int v = 0; v < 4; ++v) acc[r][q][v] = zero;
    int64_t j = 0;
    for (; j + P <= k; j += P)
      for (int q = 0; q < P; ++q) {
        const float* row = w + (j + q) * W;
        const Vec16 b[4] = {load_vector(row), load_vector(row + 16), load_vector(row + 32),
                            load_vector(row + 48)};
        for (int r = 0; r < M; ++r) {
          const float xj = x[r * k + j + q];
          for (int v = 0; v < 4; ++v) acc[r][q][v] += xj * b[v];
        }
      }
    for (; j < k; ++j) {
      const float* row = w + j * W;
      for (int r = 0; r < M; ++r)
        for (int v = 0; v < 4; ++v) acc[r][0][v] += x[r * k + j] * load_vector(row + 16 * v);
    }
    const int64_t column = panel * W, columns = std::min<int64_t>(W, n - column);
    for (int r = 0; r < M; ++r) {
      alignas(64) float sums[W];
      for (int v = 0; v < 4; ++v) {
        Vec16 sum = acc[r][0][v];
        for (int q = 1; q < P; ++q) sum += acc[r][q][v];
        std::memcpy(sums + 16 * v, &sum, sizeof sum);
      }
      float* out = y + r * n + column;
      for (int64_t i = 0; i < columns; ++i) out[i] += sums[i];
    }
  }
}

// One copy of the loop per ISA, chosen by the effective ISA (an ONEDNN_MAX_CPU_ISA cap included,
// so a capped run tests the copy that CPU would take).
template <int M>
[[gnu::target("avx512f")]] void add_panel_products_avx512(const float* x, int64_t k,
                                                          const float* panels, int64_t first,
                                                          int64_t last, float* y, int64_t n) {
  add_panel_products<M>(x, k, panels, first, last, y, n);
}

template <int M>
[[gnu::target("avx2,fma")]] void add_panel_products_avx2(const float* x, int64_t k,
                                                         const float* panels, int64_t first,
                                                         int64_t last, float* y, int64_t n) {
  add_panel_products<M>(x, k, panels, first, last, y, n);
}
#pragma GCC diagnostic pop

template <int M>
void add_products(const float* x, int64_t k, const float* panels, int64_t first, int64_t last,
                  float* y, int64_t n) {
  const CpuIsa& isa = effective_cpu_isa();
  if (isa.avx512)
    add_panel_products_avx512<M>(x, k, panels, first, last, y, n);
  else if (isa.avx2)
    add_panel_products_avx2<M>(x, k, panels, first, last, y, n);
  else
    add_panel_products<M>(x, k, panels, first, last, y, n);
}

// Below this many bytes of B one thread streams all of it.
constexpr int64_t min_parallel_bytes = int64_t{256} << 10;

}  // namespace

bool SmallRowsProduct::prepare(const Node& node, const Tensor& constant_b,
                               const dnnl::stream& stream) {
  if (!activation_.prepare(node, plain_f32({m, n}))) return false;
  if (streams()) {
    // B as stored, [K, N] or (transB) [N, K] read as [K, N] with swapped strides, packed once.
    const dnnl::memory::desc stored =
        trans_b ? dnnl::memory::desc({k, n}, dnnl::memory::data_type::f32, Dims{1, k})
                : plain_f32({k, n});
    panels_ = PackedWeights(stored, column_panels_f32(k, n, panel_width), &constant_b, stream);
  }
  return true;
}

void SmallRowsProduct::run(const Tensor& a, const Tensor& b, const Tensor* c, Tensor& y,
                           bool accumulate, const dnnl::stream& stream) {
  float* out = y.data<float>();
  if (c) {
    // beta * C broadcast over [M, N] is prefilled (or added to the residual) before the product
    // is added to it.
    const Tensor dense = c->contiguous();
    const float* values = dense.data<float>();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const float v = beta * values[(c_rows == 1 ? 0 : i) * c_cols + (c_cols == 1 ? 0 : j)];
        out[i * n + j] = accumulate ? out[i * n + j] + v : v;
      }
  } else if (!accumulate) {
    std::fill_n(out, m * n, 0.f);
  }
  if (!streams())
    run_sgemm(a, b, out);
  else
    run_streaming(a, static_cast<const float*>(panels_.get(b, stream).get_data_handle()), out);
  if (activation_.relu_in_store())
    for (int64_t i = 0; i < m * n; ++i) out[i] = std::max(out[i], 0.f);
  activation_.run(out, stream);
}

void SmallRowsProduct::run_sgemm(const Tensor& a, const Tensor& b, float* out) const {
  // Leading dimensions of at least 1, as BLAS wants even for an empty K.
  const auto ld = [](int64_t d) { return std::max<int64_t>(d, 1); };
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a.data<float>(),
                 ld(trans_a ? m : k), b.data<float>(), ld(trans_b ? k : n), 1.f, out, ld(n));
  if (status != dnnl_success)
    throw ExecutionError("oneDNN sgemm failed for a " + std::to_string(m) + "x" +
                         std::to_string(k) + " by " + std::to_string(k) + "x" + std::to_string(n) +
                         " product");
}

void SmallRowsProduct::run_streaming(const Tensor& a, const float* panels, float* out) const {
  if (k == 0 || n == 0 || m == 0) return;
  // A's rows, scaled by alpha, made contiguous: M x K floats against K x N of B.
  std::vector<float> x(static_cast<size_t>(m * k));
  const float* values = a.data<float>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j)
      x[static_cast<size_t>(i * k + j)] = alpha * values[trans_a ? j * m + i : i * k + j];
  const auto add = [&](int64_t first, int64_t last) {
    if (m == 1)
      add_products<1>(x.data(), k, panels, first, last, out, n);
    else
      add_products<2>(x.data(), k, panels, first, last, out, n);
  };
  const int64_t count = (n + panel_width - 1) / panel_width;
  const int64_t bytes = k * n * static_cast<int64_t>(sizeof(float));
  const int team = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), count));
  if (team < 2 || bytes < min_parallel_bytes) {
    add(0, count);
    return;
  }
  // Each thread a contiguous range of panels: one contiguous range of B's copy, and columns of y
  // no other thread writes.
#pragma omp parallel num_threads(team)
  {
    const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    add(count * t / threads, count * (t + 1) / threads);
  }
}

}  // namespace troupe::kernels::onednn
