// RNN, GRU and LSTM in f32 on oneDNN's sgemm where oneDNN's recurrent primitive does not serve
// (recurrent_primitive.hpp): the input projection of every time step is one
// GEMM ([steps x batch, input] x W^T), each step's recurrent projection another
// ([batch, hidden] x R^T), and the gate arithmetic vectorized loops over each batch row
// (gate_activations.hpp). The reference kernel (kernels/reference/recurrent.cpp) is the
// specification; non-default activations run there.

#include <dnnl.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/gate_activations.hpp"
#include "kernels/dnnl/recurrent_primitive.hpp"
#include "kernels/reference/recurrent.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

using reference::RecurrentSpec;

// C[M,N] = A[M,K] x B[N,K]^T + beta C, row-major.
void gemm_bt(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
             int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (dnnl_sgemm('N', 'T', M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc) != dnnl_success)
    throw ExecutionError("oneDNN sgemm failed");
}

class RecurrentKernel final : public Kernel {
 public:
  explicit RecurrentKernel(const KernelRequest& r)
      : node_(r.node), f32_asked_bf16_(r.compute_precision == ElementType::bf16) {}

  std::string implementation() const override {
    return std::string("dnnl:sgemm_recurrent") + (f32_asked_bf16_ ? f32_instead_of_bf16 : "");
  }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    // The attributes are read once per input shape, not per run.
    if (in[0].shape() != spec_x_ || in[2].shape() != spec_r_) {
      spec_ = reference::read_recurrent_spec(node_, in[0].shape(), in[2].shape());
      spec_x_ = in[0].shape();
      spec_r_ = in[2].shape();
    }
    const RecurrentSpec& s = spec_;
    const int64_t G = s.gates, H = s.hidden, I = s.input, D = s.directions, N = s.batch;
    const int64_t GH = G * H;
    auto input = [&](size_t i) -> const float* {
      return i < in.size() && !in[i].empty() ? in[i].data<float>() : nullptr;
    };
    const float* X = input(0);
    const float* B = input(3);
    const float* initial_h = input(5);
    const float* initial_c = s.cell == RecurrentSpec::Cell::lstm ? input(6) : nullptr;
    std::vector<int64_t> lengths(static_cast<size_t>(N), s.seq);
    if (in.size() > 4 && !in[4].empty()) {
      lengths = in[4].element_type() == ElementType::i64
                    ? in[4].to_vector<int64_t>()
                    : std::vector<int64_t>(in[4].data<int32_t>(), in[4].data<int32_t>() + N);
      for (int64_t len : lengths)
        if (len < 0 || len > s.seq)
          throw ExecutionError(node_.op_type + " node '" + node_.name + "': sequence_lens has " +
                               std::to_string(len) + ", expected 0.." + std::to_string(s.seq));
    }
    float* Y = !out.empty() && !out[0].empty() ? out[0].data<float>() : nullptr;
    float* Y_h = out.size() > 1 && !out[1].empty() ? out[1].data<float>() : nullptr;
    float* Y_c = out.size() > 2 && !out[2].empty() ? out[2].data<float>() : nullptr;
    if (Y) std::fill(Y, Y + out[0].size(), 0.0f);
    const int64_t longest = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());

    // Rows of X and of the projected inputs: t * N + b (layout 0) or b * seq + t (layout 1).
    auto row = [&](int64_t t, int64_t b) { return s.batch_major ? b * s.seq + t : t * N + b; };
    auto state_at = [&](int64_t d, int64_t b) {
      return (s.batch_major ? b * D + d : d * N + b) * H;
    };
    projected_.resize(static_cast<size_t>(s.seq * N * GH));
    recurrent_.resize(static_cast<size_t>(N * GH));
    h_.resize(static_cast<size_t>(N * H));
    c_.resize(static_cast<size_t>(N * H));
    reset_h_.resize(static_cast<size_t>(N * H));

    for (int64_t d = 0; d < D; ++d) {
      const bool backwards = d == 1 || s.reverse;
      const float* W = in[1].data<float>() + d * GH * I;
      const float* R = in[2].data<float>() + d * GH * H;
      const float* Wb = B ? B + d * 2 * GH : nullptr;
      const float* Rb = B ? Wb + GH : nullptr;
      const float* P =
          s.cell == RecurrentSpec::Cell::lstm && input(7) ? input(7) + d * 3 * H : nullptr;
      // Every step's input projection at once, with both biases folded in: they only add, except
      // GRU's recurrent candidate bias with linear_before_reset, which the reset gate scales.
      const bool gru_lbr = s.cell == RecurrentSpec::Cell::gru && s.linear_before_reset;
      gemm_bt(s.seq * N, GH, I, X, I, W, I, 0.0f, projected_.data(), GH);
      if (B) {
        bias_.assign(Wb, Wb + GH);
        for (int64_t j = 0; j < GH; ++j)
          if (!(gru_lbr && j >= 2 * H)) bias_[j] += Rb[j];
        for (int64_t r = 0; r < s.seq * N; ++r) {
          float* p = projected_.data() + r * GH;
          for (int64_t j = 0; j < GH; ++j) p[j] += bias_[j];
        }
      }
      const float* candidate_bias = gru_lbr && Rb ? Rb + 2 * H : nullptr;
      for (int64_t b = 0; b < N; ++b)
        for (int64_t j = 0; j < H; ++j) {
          h_[b * H + j] = initial_h ? initial_h[state_at(d, b) + j] : 0.0f;
          c_[b * H + j] = initial_c ? initial_c[state_at(d, b) + j] : 0.0f;
        }
      // The time index row b reads at this step, -1 once its sequence has ended.
      auto time_of = [&](int64_t b, int64_t step) -> int64_t {
        const int64_t len = lengths[static_cast<size_t>(b)];
        if (step >= len) return -1;
        return backwards ? len - 1 - step : step;
      };
      // GRU without linear_before_reset applies R_h to r * h: the first gemm covers z and r.
      const bool split_gru = s.cell == RecurrentSpec::Cell::gru && !s.linear_before_reset;
      gates_.resize(static_cast<size_t>(GH));
      float* a = gates_.data();
      for (int64_t step = 0; step < longest; ++step) {
        gemm_bt(N, split_gru ? 2 * H : GH, H, h_.data(), H, R, H, 0.0f, recurrent_.data(), GH);
        if (split_gru) {
          for (int64_t b = 0; b < N; ++b) {
            const int64_t t = time_of(b, step);
            if (t < 0) continue;
            const float* p = projected_.data() + row(t, b) * GH;
            const float* q = recurrent_.data() + b * GH;
            float* reset = reset_h_.data() + b * H;
            sum_clipped(s, p + H, q + H, reset, H);
            sigmoid_in_place(reset, H);
            for (int64_t j = 0; j < H; ++j) reset[j] *= h_[b * H + j];
          }
          gemm_bt(N, H, H, reset_h_.data(), H, R + 2 * H * H, H, 0.0f, recurrent_.data() + 2 * H,
                  GH);
        }
        for (int64_t b = 0; b < N; ++b) {
          const int64_t t = time_of(b, step);
          if (t < 0) continue;
          const float* p = projected_.data() + row(t, b) * GH;
          const float* q = recurrent_.data() + b * GH;
          float* h = h_.data() + b * H;
          float* c = c_.data() + b * H;
          if (s.cell == RecurrentSpec::Cell::rnn) {
            sum_clipped(s, p, q, h, H);
            tanh_in_place(h, H);
          } else if (s.cell == RecurrentSpec::Cell::gru) {
            // a: z, then (lbr) r, then the candidate.
            sum_clipped(s, p, q, a, split_gru ? H : 2 * H);
            sigmoid_in_place(a, split_gru ? H : 2 * H);
            float* candidate = a + 2 * H;
            if (split_gru) {
              sum_clipped(s, p + 2 * H, q + 2 * H, candidate, H);
            } else {
              const float* r = a + H;
              for (int64_t j = 0; j < H; ++j) {
                const float rb = candidate_bias ? candidate_bias[j] : 0.0f;
                candidate[j] = p[2 * H + j] + r[j] * (q[2 * H + j] + rb);
              }
              clip_in_place(s, candidate, H);
            }
            tanh_in_place(candidate, H);
            for (int64_t j = 0; j < H; ++j) h[j] = (1.0f - a[j]) * candidate[j] + a[j] * h[j];
          } else {
            // a: i, o, f, c~ (ONNX's order). The peepholes of i and f read the previous cell,
            // o's the new one.
            float* i = a;
            float* o = a + H;
            float* f = a + 2 * H;
            float* g = a + 3 * H;
            for (int64_t j = 0; j < GH; ++j) a[j] = p[j] + q[j];
            if (P)
              for (int64_t j = 0; j < H; ++j) {
                i[j] += P[j] * c[j];
                f[j] += P[2 * H + j] * c[j];
              }
            clip_in_place(s, i, H);
            clip_in_place(s, f, H);
            clip_in_place(s, g, H);
            sigmoid_in_place(i, H);
            if (s.input_forget) {
              for (int64_t j = 0; j < H; ++j) f[j] = 1.0f - i[j];
            } else {
              sigmoid_in_place(f, H);
            }
            tanh_in_place(g, H);
            for (int64_t j = 0; j < H; ++j) c[j] = f[j] * c[j] + i[j] * g[j];
            if (P)
              for (int64_t j = 0; j < H; ++j) o[j] += P[H + j] * c[j];
            clip_in_place(s, o, H);
            sigmoid_in_place(o, H);
            std::copy(c, c + H, g);
            tanh_in_place(g, H);
            for (int64_t j = 0; j < H; ++j) h[j] = o[j] * g[j];
          }
          if (Y) {
            float* y = Y + (s.batch_major ? (b * s.seq + t) * D + d : (t * D + d) * N + b) * H;
            std::copy(h, h + H, y);
          }
        }
      }
      for (int64_t b = 0; b < N; ++b) {
        if (Y_h) std::copy(h_.data() + b * H, h_.data() + (b + 1) * H, Y_h + state_at(d, b));
        if (Y_c) std::copy(c_.data() + b * H, c_.data() + (b + 1) * H, Y_c + state_at(d, b));
      }
    }
  }

 private:
  static void clip_in_place(const RecurrentSpec& s, float* v, int64_t n) {
    if (s.clip <= 0) return;
    const auto bound = static_cast<float>(s.clip);
    for (int64_t j = 0; j < n; ++j) v[j] = std::clamp(v[j], -bound, bound);
  }
  // out = clip(p + q)
  static void sum_clipped(const RecurrentSpec& s, const float* p, const float* q, float* out,
                          int64_t n) {
    for (int64_t j = 0; j < n; ++j) out[j] = p[j] + q[j];
    clip_in_place(s, out, n);
  }

  Node node_;
  bool f32_asked_bf16_;  // the model computes in bf16, this kernel in f32
  RecurrentSpec spec_;
  Shape spec_x_, spec_r_;  // the X and R shapes spec_ was read for
  // Scratch kept between runs (a kernel runs on one stream at a time).
  std::vector<float> projected_, recurrent_, h_, c_, reset_h_, bias_, gates_;
};

std::unique_ptr<Kernel> make_recurrent(const KernelRequest& r) {
  for (size_t i = 0; i < r.inputs.size(); ++i)
    if (i != 4 && r.inputs[i].type != ElementType::undefined &&
        r.inputs[i].type != ElementType::f32)
      return nullptr;
  if (r.inputs.size() < 3 || r.inputs[0].shape.rank() != 3 || r.inputs[2].shape.rank() != 3)
    return nullptr;
  try {
    const RecurrentSpec spec =
        reference::read_recurrent_spec(r.node, r.inputs[0].shape, r.inputs[2].shape);
    if (!spec.default_activations) return nullptr;
  } catch (const Error&) {
    return nullptr;  // the reference kernel reports it
  }
  if (auto primitive = make_recurrent_primitive(r)) return primitive;
  return std::make_unique<RecurrentKernel>(r);
}

}  // namespace

void register_recurrent(KernelRegistry& registry) {
  for (const char* op : {"RNN", "GRU", "LSTM"})
    registry.add(backend_name, backend_priority, op, make_recurrent);
}

}  // namespace troupe::kernels::onednn
