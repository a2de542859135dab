// RNN, GRU and LSTM in f32 where oneDNN's recurrent primitive does not serve
// (recurrent_primitive.hpp): the input projection of every time step is one sgemm
// ([steps x batch, input] x W^T); each step's recurrent projection ([batch, hidden] x R^T) and its
// gates run a block of hidden units at a time on R packed for it (recurrent_steps.hpp), split
// between the stream's threads, for a few batch rows, and as one sgemm then vectorized gate loops
// over each row (gate_activations.hpp) for more. The reference kernel
// (kernels/reference/recurrent.cpp) is the specification; non-default activations run there.

#include <dnnl.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/gate_activations.hpp"
#include "kernels/dnnl/recurrent_primitive.hpp"
#include "kernels/dnnl/recurrent_steps.hpp"
#include "kernels/dnnl/shared_weights.hpp"
#include "kernels/dnnl/team.hpp"
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

void clip_in_place(const RecurrentSpec& s, float* v, int64_t n) {
  if (s.clip <= 0) return;
  const auto bound = static_cast<float>(s.clip);
  for (int64_t j = 0; j < n; ++j) v[j] = std::clamp(v[j], -bound, bound);
}

// out = clip(p + q)
void sum_clipped(const RecurrentSpec& s, const float* p, const float* q, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = p[j] + q[j];
  clip_in_place(s, out, n);
}

// One step of an RNN, an LSTM or a GRU with linear_before_reset for hidden units [u0, u0 + n) of
// one batch row, from that row's input projection p (gate g of unit u at p[g * H + u], both
// biases in, but GRU's candidate recurrent bias) and its recurrent projection q (gate g of unit
// u0 + j at q[g * q_stride + j]). h_prev, h and c point at unit u0 (h may be h_prev); `a` is
// scratch of gates * n floats.
struct Cell {
  const RecurrentSpec& s;
  const float* peepholes;       // LSTM's P of this direction, or nullptr
  const float* candidate_bias;  // GRU's recurrent candidate bias Rb_h (linear_before_reset)

  void units(const float* p, const float* q, int64_t q_stride, int64_t u0, int64_t n,
             const float* h_prev, float* h, float* c, float* a) const {
    const int64_t H = s.hidden;
    p += u0;
    if (s.cell == RecurrentSpec::Cell::rnn) {
      sum_clipped(s, p, q, h, n);
      tanh_in_place(h, n);
    } else if (s.cell == RecurrentSpec::Cell::gru) {
      // a: z, r, then the candidate.
      float* z = a;
      float* r = a + n;
      float* candidate = a + 2 * n;
      sum_clipped(s, p, q, z, n);
      sum_clipped(s, p + H, q + q_stride, r, n);
      sigmoid_in_place(a, 2 * n);
      const float* rb = candidate_bias ? candidate_bias + u0 : nullptr;
      for (int64_t j = 0; j < n; ++j)
        candidate[j] = p[2 * H + j] + r[j] * (q[2 * q_stride + j] + (rb ? rb[j] : 0.0f));
      clip_in_place(s, candidate, n);
      tanh_in_place(candidate, n);
      for (int64_t j = 0; j < n; ++j) h[j] = (1.0f - z[j]) * candidate[j] + z[j] * h_prev[j];
    } else {
      // a: i, o, f, c~ (ONNX's order). The peepholes of i and f read the previous cell, o's the
      // new one.
      float* i = a;
      float* o = a + n;
      float* f = a + 2 * n;
      float* g = a + 3 * n;
      for (int64_t gate = 0; gate < 4; ++gate)
        for (int64_t j = 0; j < n; ++j) a[gate * n + j] = p[gate * H + j] + q[gate * q_stride + j];
      const float* P = peepholes ? peepholes + u0 : nullptr;
      if (P)
        for (int64_t j = 0; j < n; ++j) {
          i[j] += P[j] * c[j];
          f[j] += P[2 * H + j] * c[j];
        }
      clip_in_place(s, i, n);
      clip_in_place(s, f, n);
      clip_in_place(s, g, n);
      sigmoid_in_place(i, n);
      if (s.input_forget) {
        for (int64_t j = 0; j < n; ++j) f[j] = 1.0f - i[j];
      } else {
        sigmoid_in_place(f, n);
      }
      tanh_in_place(g, n);
      for (int64_t j = 0; j < n; ++j) c[j] = f[j] * c[j] + i[j] * g[j];
      if (P)
        for (int64_t j = 0; j < n; ++j) o[j] += P[H + j] * c[j];
      clip_in_place(s, o, n);
      sigmoid_in_place(o, n);
      std::copy(c, c + n, g);
      tanh_in_place(g, n);
      for (int64_t j = 0; j < n; ++j) h[j] = o[j] * g[j];
    }
  }
};

// Batch rows up to which a step's recurrent product runs a block of units at a time on the
// packed weights (all rows in one pass over the block); more rows take one sgemm per step.
constexpr int64_t max_block_rows = max_recurrent_block_rows;
// Multiply-accumulates of one step from which the blocks of a step are split between the
// stream's threads (each keeps its blocks of R in its own core's cache; every step then ends in
// a barrier).
constexpr int64_t min_split_step_macs = 65536;

class RecurrentKernel final : public Kernel {
 public:
  explicit RecurrentKernel(const KernelRequest& r)
      : node_(r.node),
        f32_asked_bf16_(r.compute_precision == ElementType::bf16),
        unit_blocks_(recurrent_steps_allowed()) {
    if (r.constant_inputs.size() > 2 && r.constant_inputs[2]) constant_r_ = *r.constant_inputs[2];
  }

  std::string implementation() const override {
    return std::string("dnnl:recurrent_steps") + (f32_asked_bf16_ ? f32_instead_of_bf16 : "");
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
      // Only the steps a sequence reaches are read (a padded batch's sequence_lens, a packed
      // sequence's lengths): time-major, the first `longest` steps of every row; batch-major,
      // each row's own length.
      const bool gru_lbr = s.cell == RecurrentSpec::Cell::gru && s.linear_before_reset;
      if (B) {
        bias_.assign(Wb, Wb + GH);
        for (int64_t j = 0; j < GH; ++j)
          if (!(gru_lbr && j >= 2 * H)) bias_[j] += Rb[j];
      }
      auto project = [&](int64_t first_row, int64_t rows) {
        if (rows == 0) return;
        float* p0 = projected_.data() + first_row * GH;
        gemm_bt(rows, GH, I, X + first_row * I, I, W, I, 0.0f, p0, GH);
        if (!B) return;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < GH; ++j) p0[r * GH + j] += bias_[j];
      };
      if (s.batch_major) {
        for (int64_t b = 0; b < N; ++b) project(b * s.seq, lengths[static_cast<size_t>(b)]);
      } else {
        project(0, longest * N);
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
      // GRU without linear_before_reset applies R_h to r * h, which needs every unit's reset gate:
      // two products per step (the first covers z and r).
      const bool split_gru = s.cell == RecurrentSpec::Cell::gru && !s.linear_before_reset;
      const Cell cell{s, P, candidate_bias};
      auto store_y = [&](int64_t b, int64_t t, const float* h, int64_t from, int64_t n) {
        if (!Y) return;
        float* y = Y + (s.batch_major ? (b * s.seq + t) * D + d : (t * D + d) * N + b) * H;
        std::copy(h + from, h + from + n, y + from);
      };
      const float* final_h = h_.data();
      if (unit_blocks_ && split_gru && N <= max_block_rows) {
        final_h = run_split_gru_blocks(packed_r(in[2], d), N, longest, time_of, row, store_y);
      } else if (unit_blocks_ && N <= max_block_rows) {
        final_h = run_blocks(cell, packed_r(in[2], d), N, longest, time_of, row, store_y);
      } else {
        gates_.resize(static_cast<size_t>(GH));
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
            if (split_gru) {
              float* a = gates_.data();
              sum_clipped(s, p, q, a, H);
              sigmoid_in_place(a, H);
              float* candidate = a + 2 * H;
              sum_clipped(s, p + 2 * H, q + 2 * H, candidate, H);
              tanh_in_place(candidate, H);
              for (int64_t j = 0; j < H; ++j) h[j] = (1.0f - a[j]) * candidate[j] + a[j] * h[j];
            } else {
              cell.units(p, q, H, 0, H, h, h, c_.data() + b * H, gates_.data());
            }
            store_y(b, t, h, 0, H);
          }
        }
      }
      for (int64_t b = 0; b < N; ++b) {
        if (Y_h) std::copy(final_h + b * H, final_h + (b + 1) * H, Y_h + state_at(d, b));
        if (Y_c) std::copy(c_.data() + b * H, c_.data() + (b + 1) * H, Y_c + state_at(d, b));
      }
    }
  }

 private:
  bool split_gru() const {
    return spec_.cell == RecurrentSpec::Cell::gru && !spec_.linear_before_reset;
  }

  // One direction's R [G * H, H] packed (recurrent_steps.hpp): a GRU without linear_before_reset
  // as z and r together, then h's rows on their own (they multiply r * h, known only after the
  // first product).
  void pack_direction(const float* R, float* to) const {
    const int64_t G = spec_.gates, H = spec_.hidden;
    if (!split_gru()) return pack_recurrent_weights(R, G, H, to);
    pack_recurrent_weights(R, 2, H, to);
    pack_recurrent_weights(R + 2 * H * H, 1, H, to + packed_recurrent_weights_size(2, H));
  }

  // The packed R of direction d: a constant's packed once and shared with the model's other
  // streams, else packed on every run.
  const float* packed_r(const Tensor& R, int64_t d) {
    const int64_t G = spec_.gates, H = spec_.hidden, D = spec_.directions;
    const int64_t size = packed_recurrent_weights_size(G, H);
    if (constant_r_.empty()) {
      own_packed_r_.resize(static_cast<size_t>(size));
      pack_direction(R.data<float>() + d * G * H * H, own_packed_r_.data());
      return own_packed_r_.data();
    }
    if (!shared_r_)
      shared_r_ = shared_transformed_weights(
          constant_r_, plain_f32({D, G * H, H}),
          split_gru() ? plain_f32({D * size / 2, 2}) : plain_f32({D * size}),
          [&](const Tensor& w, dnnl::memory& to) {
            for (int64_t e = 0; e < D; ++e)
              pack_direction(w.data<float>() + e * G * H * H,
                             static_cast<float*>(to.get_data_handle()) + e * size);
          });
    return static_cast<const float*>(shared_r_->packed.get_data_handle()) + d * size;
  }

  // run_blocks for a GRU without linear_before_reset: each step in two passes over the blocks,
  // z and r (and r * h_{t-1}) first, then R_h's product of r * h_{t-1} and the new state.
  template <class TimeOf, class Row, class StoreY>
  const float* run_split_gru_blocks(const float* packed, int64_t N, int64_t longest,
                                    const TimeOf& time_of, const Row& row, const StoreY& store_y) {
    const RecurrentSpec& s = spec_;
    const int64_t H = s.hidden, GH = 3 * H;
    constexpr int64_t B = recurrent_unit_block;
    const int64_t blocks = (H + B - 1) / B;
    const float* packed_h = packed + packed_recurrent_weights_size(2, H);
    h_next_.resize(static_cast<size_t>(N * H));
    update_.assign(static_cast<size_t>(N * H), 0.0f);
    std::fill(reset_h_.begin(), reset_h_.end(), 0.0f);
    float* buffers[2] = {h_.data(), h_next_.data()};
    const bool split = omp_get_max_threads() > 1 && blocks > 1 && GH * H * N >= min_split_step_macs;
    run_team_if(split, [&] {
      float acc[max_block_rows * 2 * B];
      for (int64_t step = 0; step < longest; ++step) {
        const float* previous = buffers[step & 1];
        float* next = buffers[(step + 1) & 1];
        over_blocks(packed, 2, H, previous, N, step, time_of, acc,
                    [&](int64_t b, int64_t t, int64_t u0, int64_t n) {
                      if (t < 0) return;
                      const float* p = projected_.data() + row(t, b) * GH + u0;
                      float* z = update_.data() + b * H + u0;
                      float* reset = reset_h_.data() + b * H + u0;
                      sum_clipped(s, p, acc + b * 2 * B, z, n);
                      sum_clipped(s, p + H, acc + b * 2 * B + B, reset, n);
                      sigmoid_in_place(z, n);
                      sigmoid_in_place(reset, n);
                      for (int64_t j = 0; j < n; ++j) reset[j] *= previous[b * H + u0 + j];
                    });
        over_blocks(packed_h, 1, H, reset_h_.data(), N, step, time_of, acc,
                    [&](int64_t b, int64_t t, int64_t u0, int64_t n) {
                      const float* from = previous + b * H + u0;
                      float* to = next + b * H + u0;
                      if (t < 0) return void(std::copy(from, from + n, to));
                      const float* p = projected_.data() + row(t, b) * GH + u0;
                      const float* z = update_.data() + b * H + u0;
                      float* candidate = acc + b * B;
                      sum_clipped(s, p + 2 * H, candidate, candidate, n);
                      tanh_in_place(candidate, n);
                      for (int64_t j = 0; j < n; ++j)
                        to[j] = (1.0f - z[j]) * candidate[j] + z[j] * from[j];
                      store_y(b, t, next + b * H, u0, n);
                    });
      }
    });
    return buffers[longest & 1];
  }

  // One pass of a step over the blocks of units, called on every thread of a run_team_if team
  // (its blocks shared out the same way at every step; the loop's closing barrier ends the
  // pass): each block's recurrent product for the N rows of h into acc, then body(b, t, u0, n)
  // for every row b, t < 0 where b's sequence has ended.
  template <class TimeOf, class Body>
  static void over_blocks(const float* packed, int64_t gates, int64_t H, const float* h, int64_t N,
                          int64_t step, const TimeOf& time_of, float* acc, const Body& body) {
    constexpr int64_t B = recurrent_unit_block;
    const int64_t blocks = (H + B - 1) / B;
#pragma omp for schedule(static)
    for (int64_t ub = 0; ub < blocks; ++ub) {
      const int64_t u0 = ub * B, n = std::min(B, H - u0);
      // Every row's product (a row whose sequence has ended too: cheaper than a pass per row).
      recurrent_block_product(packed, ub, gates, H, h, H, N, acc);
      for (int64_t b = 0; b < N; ++b) body(b, time_of(b, step), u0, n);
    }
  }

  // Every step of one direction a block of units at a time: each block's recurrent product, then
  // its gates. h_ holds the initial state; returns the buffer holding the last.
  template <class TimeOf, class Row, class StoreY>
  const float* run_blocks(const Cell& cell, const float* packed, int64_t N, int64_t longest,
                          const TimeOf& time_of, const Row& row, const StoreY& store_y) {
    const int64_t H = spec_.hidden, G = spec_.gates, GH = G * H;
    constexpr int64_t B = recurrent_unit_block;
    const int64_t blocks = (H + B - 1) / B;
    h_next_.resize(static_cast<size_t>(N * H));
    float* buffers[2] = {h_.data(), h_next_.data()};
    const bool split = omp_get_max_threads() > 1 && blocks > 1 && GH * H * N >= min_split_step_macs;
    run_team_if(split, [&] {
      float acc[max_block_rows * 4 * B];
      float a[4 * B];
      for (int64_t step = 0; step < longest; ++step) {
        const float* previous = buffers[step & 1];
        float* next = buffers[(step + 1) & 1];
        over_blocks(packed, G, H, previous, N, step, time_of, acc,
                    [&](int64_t b, int64_t t, int64_t u0, int64_t n) {
                      const float* from = previous + b * H + u0;
                      float* to = next + b * H + u0;
                      if (t < 0) return void(std::copy(from, from + n, to));
                      cell.units(projected_.data() + row(t, b) * GH, acc + b * G * B, B, u0, n,
                                 from, to, c_.data() + b * H + u0, a);
                      store_y(b, t, next + b * H, u0, n);
                    });
      }
    });
    return buffers[longest & 1];
  }

  Node node_;
  bool f32_asked_bf16_;  // the model computes in bf16, this kernel in f32
  bool unit_blocks_;     // TROUPE_RECURRENT_STEPS
  RecurrentSpec spec_;
  Shape spec_x_, spec_r_;  // the X and R shapes spec_ was read for
  // Scratch kept between runs (a kernel runs on one stream at a time).
  std::vector<float> projected_, recurrent_, h_, h_next_, c_, reset_h_, update_, bias_, gates_;
  Tensor constant_r_;                              // R where it is a model constant
  std::shared_ptr<const SharedWeights> shared_r_;  // constant_r_ packed
  std::vector<float> own_packed_r_;                // a non-constant R packed for this run
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
