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

// y[i][0:n] += sum over j < rows of x[i][j] * w[j][0:n], for the M rows of x (1 or 2; row i of x
// at x + i * k, of y at y + i * ldy), w's rows `ldw` apart. Eight rows of w per pass: eight
// streams of B in flight keep the core's prefetchers busy, which one row at a time does not (on
// one Zen 4 core, B from memory: 20-23 GB/s against sgemm's 16-18). A weight is loaded once for
// both rows of x.
template <int M>
[[gnu::always_inline]] inline void add_row_products(const float* __restrict x, int64_t k,
                                                    const float* __restrict w, int64_t ldw,
                                                    int64_t rows, float* __restrict y, int64_t ldy,
                                                    int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= rows; j += 8) {
    const float* w0 = w + j * ldw;
    const float *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw, *w4 = w3 + ldw;
    const float *w5 = w4 + ldw, *w6 = w5 + ldw, *w7 = w6 + ldw;
    for (int r = 0; r < M; ++r) {
      const float* xr = x + r * k + j;
      const float x0 = xr[0], x1 = xr[1], x2 = xr[2], x3 = xr[3];
      const float x4 = xr[4], x5 = xr[5], x6 = xr[6], x7 = xr[7];
      float* yr = y + r * ldy;
      for (int64_t i = 0; i < n; ++i)
        yr[i] += ((x0 * w0[i] + x1 * w1[i]) + (x2 * w2[i] + x3 * w3[i])) +
                 ((x4 * w4[i] + x5 * w5[i]) + (x6 * w6[i] + x7 * w7[i]));
    }
  }
  for (; j < rows; ++j)
    for (int r = 0; r < M; ++r) {
      const float xj = x[r * k + j];
      const float* wj = w + j * ldw;
      float* yr = y + r * ldy;
      for (int64_t i = 0; i < n; ++i) yr[i] += xj * wj[i];
    }
}

// One copy of the loop per ISA, chosen by the effective ISA (an ONEDNN_MAX_CPU_ISA cap included,
// so a capped run tests the copy that CPU would take).
template <int M>
[[gnu::target("avx512f")]] void add_products_avx512(const float* x, int64_t k, const float* w,
                                                    int64_t ldw, int64_t rows, float* y,
                                                    int64_t ldy, int64_t n) {
  add_row_products<M>(x, k, w, ldw, rows, y, ldy, n);
}

template <int M>
[[gnu::target("avx2,fma")]] void add_products_avx2(const float* x, int64_t k, const float* w,
                                                   int64_t ldw, int64_t rows, float* y, int64_t ldy,
                                                   int64_t n) {
  add_row_products<M>(x, k, w, ldw, rows, y, ldy, n);
}

template <int M>
void add_products(const float* x, int64_t k, const float* w, int64_t ldw, int64_t rows, float* y,
                  int64_t ldy, int64_t n) {
  const CpuIsa& isa = effective_cpu_isa();
  if (isa.avx512)
    add_products_avx512<M>(x, k, w, ldw, rows, y, ldy, n);
  else if (isa.avx2)
    add_products_avx2<M>(x, k, w, ldw, rows, y, ldy, n);
  else
    add_row_products<M>(x, k, w, ldw, rows, y, ldy, n);
}

// Below this many bytes of B one thread streams all of it.
constexpr int64_t min_parallel_bytes = int64_t{256} << 10;

}  // namespace

bool SmallRowsProduct::prepare(const Node& node, const Tensor& constant_b,
                               const dnnl::stream& stream) {
  if (!activation_.prepare(node, plain_f32({m, n}))) return false;
  if (trans_b && streams()) {
    // B [N, K] read as [K, N] with swapped strides, packed as [K, N].
    const dnnl::memory::desc transposed({k, n}, dnnl::memory::data_type::f32, Dims{1, k});
    rows_ = PackedWeights(transposed, plain_f32({k, n}), &constant_b, stream);
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
  else if (trans_b)
    run_streaming(a, static_cast<const float*>(rows_.get(b, stream).get_data_handle()), out);
  else
    run_streaming(a, b.data<float>(), out);
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

void SmallRowsProduct::run_streaming(const Tensor& a, const float* w, float* out) const {
  if (k == 0 || n == 0 || m == 0) return;
  // A's rows, scaled by alpha, made contiguous: M x K floats against K x N of B.
  std::vector<float> x(static_cast<size_t>(m * k));
  const float* values = a.data<float>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j)
      x[static_cast<size_t>(i * k + j)] = alpha * values[trans_a ? j * m + i : i * k + j];
  // y[0:m][0:n] += x[0:m][first:last] x B[first:last][0:n] (B's rows first to last).
  const auto rows = [&](int64_t first, int64_t last, float* y) {
    if (first >= last) return;
    if (m == 1)
      add_products<1>(x.data() + first, k, w + first * n, n, last - first, y, n, n);
    else
      add_products<2>(x.data() + first, k, w + first * n, n, last - first, y, n, n);
  };
  const int64_t bytes = k * n * static_cast<int64_t>(sizeof(float));
  const int team = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), k / 8));
  if (team < 2 || bytes < min_parallel_bytes) {
    rows(0, k, out);
    return;
  }
  // Each thread streams its own block of B's rows, one contiguous range of memory, into a sum of
  // its own; the sums are then added to y, each thread a block of columns. (Blocks of columns
  // of every row instead gave each thread many short streams: a 4096 x 1000 B read 15% slower
  // than sgemm did.)
  std::vector<float*> sums(static_cast<size_t>(team));
#pragma omp parallel num_threads(team)
  {
    const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    thread_local std::vector<float> sum;
    sum.assign(static_cast<size_t>(m * n), 0.f);
    sums[static_cast<size_t>(t)] = sum.data();
    const int64_t blocks = k / 8;  // whole blocks of eight rows; the last thread takes the rest
    rows(blocks * t / threads * 8, t + 1 == threads ? k : blocks * (t + 1) / threads * 8,
         sum.data());
#pragma omp barrier
    const int64_t first = m * n * t / threads, last = m * n * (t + 1) / threads;
    for (int64_t s = 0; s < threads; ++s) {
      const float* partial = sums[static_cast<size_t>(s)];
      for (int64_t i = first; i < last; ++i) out[i] += partial[i];
    }
  }
}

}  // namespace troupe::kernels::onednn
