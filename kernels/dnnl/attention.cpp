// ScaledDotProductAttention (engine/ops/attention.hpp) in f32. Unfused, a head's [M, N] scores
// go to memory three times (the first product writes them, the softmax reads and writes them, the
// second product reads them): on DETR's encoder (8 heads of 850 x 850) that traffic made the
// two products and the softmax take as long as the feed-forward layers. Here each task takes a
// block of Q's rows of one batch, computes their scores into a buffer that stays in the core's
// cache, adds the mask, normalizes each row and multiplies by V, with oneDNN's sgemm on one
// thread; tasks are spread over the stream's threads. The operands are read in place through
// their strides: a Transpose the fusion absorbed costs nothing.
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/ops/attention.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/vector_exp.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

// Adds the mask row (stride 0: one value for the row) to a row of scores, then replaces it by
// its softmax.
TROUPE_ISA_CLONES void masked_softmax_row(float* v, int64_t n, const float* mask,
                                          int64_t mask_stride) {
  if (mask && mask_stride == 1) {
    for (int64_t i = 0; i < n; ++i) v[i] += mask[i];
  } else if (mask) {
    const float add = *mask;
    for (int64_t i = 0; i < n; ++i) v[i] += add;
  }
  // Sixteen partial maxima and sums, so that the reductions vectorize without reassociating
  // the compiler is not allowed to do.
  constexpr int lanes = 16;
  float part[lanes];
  for (float& p : part) p = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (int l = 0; l < lanes; ++l) part[l] = v[i + l] > part[l] ? v[i + l] : part[l];
  float max = -std::numeric_limits<float>::infinity();
  for (float p : part) max = p > max ? p : max;
  for (; i < n; ++i) max = v[i] > max ? v[i] : max;
  for (float& p : part) p = 0;
  for (i = 0; i + lanes <= n; i += lanes)
    for (int l = 0; l < lanes; ++l) {
      const float e = exp_of(v[i + l] - max);
      v[i + l] = e;
      part[l] += e;
    }
  float sum = 0;
  for (float p : part) sum += p;
  for (; i < n; ++i) {
    const float e = exp_of(v[i] - max);
    v[i] = e;
    sum += e;
  }
  const float inverse = 1.0f / sum;
  for (i = 0; i < n; ++i) v[i] *= inverse;
}

// The one of sgemm's operand forms an operand's last two strides allow: rows in place with a
// leading dimension ('N'), or columns ('T'); none when neither axis is contiguous.
struct MatrixForm {
  char trans = 0;
  int64_t ld = 0;
};
MatrixForm form_of(const attention::Operand& o) {
  const size_t r = o.dims.size();
  const int64_t row = o.strides[r - 2], col = o.strides[r - 1];
  if (col == 1 || o.dims[r - 1] == 1) return {'N', std::max<int64_t>(row, o.dims[r - 1])};
  if (row == 1 || o.dims[r - 2] == 1) return {'T', std::max<int64_t>(col, o.dims[r - 2])};
  return {};
}

class AttentionKernel final : public Kernel {
 public:
  explicit AttentionKernel(const KernelRequest& r)
      : node_(r.node), scale_(attention::scale(r.node)) {
    if (!all_f32(r)) throw Unsupported{};
    // Which axis of each operand is contiguous depends on its permutation alone: Q's and V's
    // rows must be, Kt either way.
    for (size_t i = 0; i < 3; ++i) {
      std::vector<int64_t> dims(r.inputs[i].shape.rank(), 2);
      const attention::Operand o = attention::operand(r.node, i, dims);
      if (o.dims.size() < 2) throw Unsupported{};
      const MatrixForm f = form_of(o);
      if (f.trans == 0 || (i != 1 && f.trans != 'N')) throw Unsupported{};
    }
    // The output's rows must be contiguous too.
    const std::vector<int64_t> y_perm = attention::perm(r.node, 3);
    if (!y_perm.empty() && y_perm.back() != static_cast<int64_t>(y_perm.size()) - 1)
      throw Unsupported{};
  }

  std::string implementation() const override { return "dnnl:attention_sgemm"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const bool has_mask = in.size() > 3 && !in[3].empty();
    const std::vector<int64_t> mask_dims = has_mask ? in[3].shape().dims() : std::vector<int64_t>{};
    const attention::Geometry g =
        attention::geometry(node_, in[0].shape().dims(), in[1].shape().dims(), in[2].shape().dims(),
                            has_mask ? &mask_dims : nullptr);
    if (out[0].size() != g.batches * g.m * g.d)
      throw ExecutionError(std::string(attention::op_type) + " node '" + node_.name +
                           "': output has " + std::to_string(out[0].size()) +
                           " elements, expected " + std::to_string(g.batches * g.m * g.d));
    float* y = out[0].data<float>();
    if (g.n == 0) {
      std::fill(y, y + out[0].size(), 0.0f);  // no keys: the product with an empty V
      return;
    }
    if (g.batches * g.m == 0) return;
    const MatrixForm qf = form_of(g.q), kf = form_of(g.kt), vf = form_of(g.v);
    if (qf.trans != 'N' || kf.trans == 0 || vf.trans != 'N' || (g.y_col != 1 && g.d > 1))
      throw ExecutionError(std::string(attention::op_type) + " node '" + node_.name +
                           "': an operand has no contiguous axis");
    const float* q = in[0].data<float>();
    const float* kt = in[1].data<float>();
    const float* v = in[2].data<float>();
    const float* mask = has_mask ? in[3].data<float>() : nullptr;
    // Rows per task: their scores (rows x N floats) fit in L2 beside the K and V they read.
    const int threads = omp_get_max_threads();
    int64_t rows = std::clamp<int64_t>((int64_t{96} << 10) / std::max<int64_t>(g.n, 1), 4, 256);
    const int64_t min_tasks = 4 * threads;
    while (rows > 4 && g.batches * ((g.m + rows - 1) / rows) < min_tasks) rows /= 2;
    const int64_t blocks = (g.m + rows - 1) / rows;
    const int64_t tasks = g.batches * blocks;
    const float scale = static_cast<float>(scale_);
    const int64_t m_stride = g.q.strides[g.q.dims.size() - 2];
    std::exception_ptr failure;
    const int team = static_cast<int>(std::min<int64_t>(threads, tasks));
#pragma omp parallel num_threads(team)
    {
      std::vector<float> scores(static_cast<size_t>(rows * g.n));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < tasks; ++t) {
        const int64_t b = t / blocks, m0 = (t % blocks) * rows;
        const int64_t count = std::min(rows, g.m - m0);
        const auto [qo, ko, vo, mo, yo] = g.offsets(b);
        // No inner dimension (K = 0): every score is 0 before the mask.
        dnnl_status_t status = dnnl_success;
        if (g.k == 0)
          std::fill(scores.begin(), scores.end(), 0.0f);
        else
          status = dnnl_sgemm(qf.trans, kf.trans, count, g.n, g.k, scale, q + qo + m0 * m_stride,
                              qf.ld, kt + ko, kf.ld, 0.0f, scores.data(), g.n);
        for (int64_t r = 0; r < count && status == dnnl_success; ++r)
          masked_softmax_row(scores.data() + r * g.n, g.n,
                             mask ? mask + mo + (m0 + r) * g.mask_row : nullptr, g.mask_col);
        if (status == dnnl_success)
          status = dnnl_sgemm('N', vf.trans, count, g.d, g.n, 1.0f, scores.data(), g.n, v + vo,
                              vf.ld, 0.0f, y + yo + m0 * g.y_row, g.y_row);
        if (status != dnnl_success) {
#pragma omp critical
          failure = std::make_exception_ptr(ExecutionError(
              std::string(attention::op_type) + " node '" + node_.name + "': sgemm failed"));
        }
      }
    }
    if (failure) std::rethrow_exception(failure);
  }

 private:
  Node node_;
  double scale_;
};

}  // namespace

void register_attention(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, attention::op_type,
               construct_kernel<AttentionKernel>);
}

}  // namespace troupe::kernels::onednn
