// RNN and LSTM in bf16 on oneDNN's recurrent primitives, for a model computing in bf16 on a CPU
// with bf16 instructions: its brgemm kernels compute a step's product and gate arithmetic
// together on bf16 weights packed once (troupe's sgemm kernel, recurrent.cpp, has f32 only).
// Measured on Zen 4 (AVX512_BF16), two stacked LSTM layers of 256 units over 64 steps: 0.76 and
// 1.02 ms a layer against 1.4 and 1.8 ms on the sgemm kernel. In f32 the primitive lost to the
// sgemm kernel (the model 0.81x), so f32 stays there; so does whatever oneDNN 2.6 answers with
// its reference RNN (GRU cells, any cell without bf16 instructions) and what the primitives lack:
// activations other than the defaults, clip, input_forget, peepholes, sequence_lens, and weights
// that are not constants.
//
// ONNX and oneDNN differ in three ways, bridged here: the LSTM gate order (ONNX i o f c,
// oneDNN i f c o), the weights' layout (ONNX [dirs, gates x hidden, input], oneDNN ldigo), and a
// bidirectional Y (ONNX [seq, dirs, batch, hidden], oneDNN's concat [seq, batch, dirs x
// hidden]): a reorder moves the output there, as it moves batch-major sequences (layout 1).

#include "kernels/dnnl/recurrent_primitive.hpp"

#include <cstring>
#include <vector>

#include "kernels/cpu_isa.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/reference/recurrent.hpp"

namespace troupe::kernels::onednn {

namespace {

using reference::RecurrentSpec;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// For each of oneDNN's gates, the ONNX gate it is (LSTM: oneDNN i f c o, ONNX i o f c).
std::vector<int64_t> onnx_gate_of(RecurrentSpec::Cell cell) {
  if (cell == RecurrentSpec::Cell::lstm) return {0, 2, 3, 1};
  if (cell == RecurrentSpec::Cell::gru) return {0, 1, 2};
  return {0};
}

// ONNX W or R ([dirs, gates x hidden, K]) as oneDNN's plain ldigo [1, dirs, K, gates, hidden].
Tensor weights_ldigo(const Tensor& onnx, const RecurrentSpec& s, int64_t K) {
  const int64_t D = s.directions, G = s.gates, H = s.hidden;
  const std::vector<int64_t> gate = onnx_gate_of(s.cell);
  const Tensor dense = onnx.contiguous();
  const float* w = dense.data<float>();
  Tensor out(ElementType::f32, Shape({1, D, K, G, H}));
  float* o = out.data<float>();
  for (int64_t d = 0; d < D; ++d)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t h = 0; h < H; ++h)
          o[(((d * K) + k) * G + g) * H + h] = w[((d * G + gate[g]) * H + h) * K + k];
  return out;
}

// The bias gates oneDNN's cell reads: a linear-before-reset GRU has a fourth, the candidate's
// recurrent bias, which the reset gate scales.
int64_t bias_gates(const RecurrentSpec& s) {
  return s.cell == RecurrentSpec::Cell::gru && s.linear_before_reset ? 4 : s.gates;
}

// ONNX B ([dirs, 2 x gates x hidden]: W's biases, then R's; absent: zeros) as oneDNN's plain
// ldgo [1, dirs, bias gates, hidden]: the two summed, except the GRU candidate's above.
Tensor bias_ldgo(const Tensor* onnx, const RecurrentSpec& s) {
  const int64_t D = s.directions, G = s.gates, H = s.hidden, BG = bias_gates(s);
  const bool linear_before_reset = BG > G;
  Tensor out(ElementType::f32, Shape({1, D, BG, H}));
  if (!onnx) return out;
  const std::vector<int64_t> gate = onnx_gate_of(s.cell);
  const Tensor dense = onnx->contiguous();
  const float* b = dense.data<float>();
  float* o = out.data<float>();
  for (int64_t d = 0; d < D; ++d) {
    const float* wb = b + d * 2 * G * H;
    const float* rb = wb + G * H;
    for (int64_t g = 0; g < BG; ++g)
      for (int64_t h = 0; h < H; ++h) {
        float& v = o[(d * BG + g) * H + h];
        if (g == G) {
          v = rb[2 * H + h];  // the linear-before-reset candidate's recurrent bias
        } else if (linear_before_reset && g == 2) {
          v = wb[2 * H + h];
        } else {
          v = wb[gate[g] * H + h] + rb[gate[g] * H + h];
        }
      }
  }
  return out;
}

// A state as ONNX lays it out ([dirs, batch, hidden], or [batch, dirs, hidden] in layout 1),
// described with oneDNN's ldnc dims.
dnnl::memory::desc onnx_state_desc(const RecurrentSpec& s) {
  const int64_t D = s.directions, N = s.batch, H = s.hidden;
  const Dims strides = s.batch_major ? Dims{D * N * H, H, D * H, 1} : Dims{D * N * H, N * H, H, 1};
  return dnnl::memory::desc({1, D, N, H}, dt::f32, strides);
}

// The output sequence viewed as [seq, batch, dirs, hidden]: as oneDNN writes it (tnc, its last
// dimension dirs x hidden) and as ONNX wants Y.
dnnl::memory::desc primitive_y_desc(const RecurrentSpec& s, dt type) {
  const int64_t N = s.batch, D = s.directions, H = s.hidden;
  return dnnl::memory::desc({s.seq, N, D, H}, type, Dims{N * D * H, D * H, H, 1});
}
dnnl::memory::desc onnx_y_desc(const RecurrentSpec& s) {
  const int64_t T = s.seq, N = s.batch, D = s.directions, H = s.hidden;
  const Dims strides = s.batch_major ? Dims{D * H, T * D * H, H, 1} : Dims{D * N * H, H, N * H, 1};
  return dnnl::memory::desc({T, N, D, H}, dt::f32, strides);
}

class RecurrentPrimitiveKernel final : public DnnlKernel {
 public:
  explicit RecurrentPrimitiveKernel(const KernelRequest& request)
      : DnnlKernel(request),
        has_y_(output_present(request, 0)),
        has_y_h_(output_present(request, 1)),
        has_y_c_(output_present(request, 2)) {
    // A node whose shapes are known only at run time is prepared then, where a reference
    // primitive could no longer be declined: decline now if oneDNN answers the cell with its
    // reference at any shape (it does so per cell and direction, e.g. GRU in oneDNN 2.6).
    const Shape& x = request.inputs[0].shape;
    const Shape& r = request.inputs[2].shape;
    if (!x.is_static() && r.is_static()) {
      std::vector<int64_t> dims(x.rank());
      for (size_t i = 0; i < x.rank(); ++i) dims[i] = x[i] >= 0 ? x[i] : 1;
      spec_ = reference::read_recurrent_spec(node_, Shape(dims), r);
      if (is_reference(make(dt::bf16).pd)) throw Unsupported{};
    }
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& /*outputs*/) override {
    const RecurrentSpec s = reference::read_recurrent_spec(node_, inputs[0], inputs[2]);
    if (!s.default_activations || s.clip > 0 || s.input_forget) return false;
    spec_ = s;
    const Made made = make(dt::bf16);
    const dnnl::rnn_primitive_desc_base& pd = made.pd;
    // oneDNN's reference RNN (GRU cells in oneDNN 2.6): troupe's sgemm kernel instead.
    if (is_reference(pd)) return false;
    primitive_ = Primitive(made.primitive, pd);
    const int64_t H = s.hidden;

    weights_layer_ = pack(weights_ldigo(*constant(1), s, s.input), pd.weights_layer_desc());
    weights_iter_ = pack(weights_ldigo(*constant(2), s, H), pd.weights_iter_desc());
    bias_ = pack(bias_ldgo(constant(3), s), pd.bias_desc());

    // X as ONNX lays it out, described with oneDNN's (seq, batch, input) dims.
    const dnnl::memory::desc x_md({s.seq, s.batch, s.input}, dt::f32,
                                  s.batch_major ? tag::ntc : tag::tnc);
    x_in_ = LayoutBridge(x_md, pd.src_layer_desc(), 0);
    dst_layer_ = unbound_memory(pd.dst_layer_desc());
    if (has_y_) y_out_ = LayoutBridge(onnx_y_desc(s), primitive_y_desc(s, dt::bf16), 1);

    states_.clear();
    const bool lstm = s.cell == RecurrentSpec::Cell::lstm;
    if (takes_states()) state_in(pd.src_iter_desc(), DNNL_ARG_SRC_ITER, 5);
    if (takes_states() && lstm) state_in(pd.src_iter_c_desc(), DNNL_ARG_SRC_ITER_C, 6);
    if (gives_states()) state_out(pd.dst_iter_desc(), DNNL_ARG_DST_ITER, 1, has_y_h_);
    if (gives_states() && lstm) state_out(pd.dst_iter_c_desc(), DNNL_ARG_DST_ITER_C, 2, has_y_c_);
    set_impl(pd);
    return true;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    // Y's bridge lends the primitive its sequence-major bf16 buffer; without Y the primitive
    // still writes one, into the same thread buffer.
    dst_layer_.set_data_handle(has_y_ ? y_out_.output_memory(outputs[0]).get_data_handle()
                                      : thread_buffer(2, dst_layer_.get_desc().get_size()));
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC_LAYER, x_in_.to_internal(inputs[0], stream_)},
        {DNNL_ARG_WEIGHTS_LAYER, weights_layer_},
        {DNNL_ARG_WEIGHTS_ITER, weights_iter_},
        {DNNL_ARG_BIAS, bias_},
        {DNNL_ARG_DST_LAYER, dst_layer_}};
    for (State& state : states_) {
      if (state.input)
        // An LSTM given one initial state starts the other at zero: the primitive takes both.
        args[state.arg] = has_input(state.index)
                              ? state.bridge.to_internal(inputs[state.index], stream_)
                              : state.zeros;
      else
        args[state.arg] =
            state.wanted ? state.bridge.output_memory(outputs[state.index]) : state.unwanted;
    }
    primitive_.execute(stream_, args);
    if (has_y_) y_out_.from_internal(outputs[0], stream_);
    for (State& state : states_)
      if (!state.input && state.wanted) state.bridge.from_internal(outputs[state.index], stream_);
  }

 private:
  struct Made {
    dnnl::primitive primitive;
    dnnl::rnn_primitive_desc_base pd;
  };

  // The primitive of the spec's cell computing in `type` (bf16: the LSTM's cell state in f32).
  Made make(dt type) const {
    const RecurrentSpec& s = spec_;
    const int64_t T = s.seq, N = s.batch, I = s.input, H = s.hidden, D = s.directions;
    const dnnl::memory::desc none;
    // Sequence-major: oneDNN 2.6 answers a bidirectional LSTM on batch-major (ntc) sequences
    // with its reference RNN; a batch-major X and Y are converted instead.
    const dnnl::memory::desc src_layer({T, N, I}, type, tag::tnc);
    const dnnl::memory::desc dst_layer({T, N, D * H}, type, tag::tnc);
    const dnnl::memory::desc state({1, D, N, H}, type, tag::ldnc);
    const dnnl::memory::desc cell_state({1, D, N, H}, dt::f32, tag::ldnc);
    const dnnl::memory::desc src_iter = takes_states() ? state : none;
    const dnnl::memory::desc dst_iter = gives_states() ? state : none;
    const dnnl::memory::desc weights_layer({1, D, I, s.gates, H}, type, tag::any);
    const dnnl::memory::desc weights_iter({1, D, H, s.gates, H}, type, tag::any);
    const dnnl::memory::desc bias({1, D, bias_gates(s), H}, dt::f32, tag::ldgo);
    const auto direction = s.directions == 2 ? dnnl::rnn_direction::bidirectional_concat
                           : s.reverse       ? dnnl::rnn_direction::unidirectional_right2left
                                             : dnnl::rnn_direction::unidirectional_left2right;
    const auto inference = dnnl::prop_kind::forward_inference;
    const dnnl::primitive_attr attr = primitive_attributes();
    switch (s.cell) {
      case RecurrentSpec::Cell::lstm: {
        const dnnl::memory::desc src_iter_c = takes_states() ? cell_state : none;
        const dnnl::memory::desc dst_iter_c = gives_states() ? cell_state : none;
        dnnl::lstm_forward::desc desc(inference, direction, src_layer, src_iter, src_iter_c,
                                      weights_layer, weights_iter, bias, dst_layer, dst_iter,
                                      dst_iter_c);
        dnnl::lstm_forward::primitive_desc pd(desc, attr, cpu_engine());
        return {dnnl::lstm_forward(pd), pd};
      }
      case RecurrentSpec::Cell::gru:
        if (s.linear_before_reset) {
          dnnl::lbr_gru_forward::desc desc(inference, direction, src_layer, src_iter, weights_layer,
                                           weights_iter, bias, dst_layer, dst_iter);
          dnnl::lbr_gru_forward::primitive_desc pd(desc, attr, cpu_engine());
          return {dnnl::lbr_gru_forward(pd), pd};
        } else {
          dnnl::gru_forward::desc desc(inference, direction, src_layer, src_iter, weights_layer,
                                       weights_iter, bias, dst_layer, dst_iter);
          dnnl::gru_forward::primitive_desc pd(desc, attr, cpu_engine());
          return {dnnl::gru_forward(pd), pd};
        }
      case RecurrentSpec::Cell::rnn: {
        dnnl::vanilla_rnn_forward::desc desc(inference, dnnl::algorithm::eltwise_tanh, direction,
                                             src_layer, src_iter, weights_layer, weights_iter, bias,
                                             dst_layer, dst_iter);
        dnnl::vanilla_rnn_forward::primitive_desc pd(desc, attr, cpu_engine());
        return {dnnl::vanilla_rnn_forward(pd), pd};
      }
    }
    throw Unsupported{};
  }

  // `plain` in the primitive's layout and type, in memory of the kernel's own.
  dnnl::memory pack(const Tensor& plain, const dnnl::memory::desc& packed) {
    const Dims dims = to_dims(plain.shape());
    dnnl::memory from(plain_f32(dims), cpu_engine(), const_cast<void*>(plain.raw_data()));
    dnnl::memory to(packed, cpu_engine());
    dnnl::reorder(from, to).execute(stream_, from, to);
    stream_.wait();
    return to;
  }

  // An initial state (input `index`) or a final one (output `index`), converted between the
  // ONNX tensor and the primitive's type and layout on every run.
  struct State {
    int arg;
    size_t index;
    bool input;
    bool wanted;  // an output the node has (the primitive writes both LSTM states or neither)
    LayoutBridge bridge;
    dnnl::memory zeros;     // an omitted initial state
    dnnl::memory unwanted;  // a final state the node does not have
  };
  void state_in(const dnnl::memory::desc& md, int arg, size_t index) {
    dnnl::memory zeros;
    if (!has_input(index)) {
      zeros = dnnl::memory(md, cpu_engine());
      std::memset(zeros.get_data_handle(), 0, md.get_size());
    }
    states_.push_back(
        {arg, index, true, true, LayoutBridge(onnx_state_desc(spec_), md), zeros, {}});
  }
  void state_out(const dnnl::memory::desc& md, int arg, size_t index, bool wanted) {
    dnnl::memory unwanted = wanted ? dnnl::memory() : dnnl::memory(md, cpu_engine());
    states_.push_back(
        {arg, index, false, wanted, LayoutBridge(onnx_state_desc(spec_), md), {}, unwanted});
  }
  // Initial states given / final states asked for; an LSTM's two go together.
  bool takes_states() const { return has_input(5) || has_input(6); }
  bool gives_states() const { return has_y_h_ || has_y_c_; }

  static bool output_present(const KernelRequest& request, size_t o) {
    return o < request.outputs.size() && request.outputs[o].type != ElementType::undefined;
  }

  RecurrentSpec spec_;
  const bool has_y_, has_y_h_, has_y_c_;
  Primitive primitive_;
  dnnl::memory weights_layer_, weights_iter_, bias_;
  dnnl::memory dst_layer_;  // bound on every run
  // X to bf16 (and sequence-major) in the thread's conversion slot 0, Y from bf16 in slot 1.
  LayoutBridge x_in_, y_out_;
  std::vector<State> states_;
};

}  // namespace

std::unique_ptr<Kernel> make_recurrent_primitive(const KernelRequest& request) {
  if (request.compute_precision != ElementType::bf16 || !effective_cpu_isa().bf16) return nullptr;
  // The weights (and biases) are packed once: constants only. Peepholes and sequence_lens have
  // no counterpart in the primitives.
  auto constant = [&](size_t i) {
    return i < request.constant_inputs.size() && request.constant_inputs[i] != nullptr;
  };
  auto present = [&](size_t i) {
    return i < request.inputs.size() && request.inputs[i].type != ElementType::undefined;
  };
  if (!constant(1) || !constant(2) || (present(3) && !constant(3)) || present(4) || present(7))
    return nullptr;
  return create_kernel<RecurrentPrimitiveKernel>(request);
}

}  // namespace troupe::kernels::onednn
