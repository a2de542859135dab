// Reference kernels of RNN, GRU and LSTM: the ONNX equations written out per batch row and time
// step, in double. Inputs X, W, R[, B, sequence_lens, initial_h[, initial_c, P]]; outputs
// Y[, Y_h[, Y_c]]. A row whose sequence_lens entry is shorter than the sequence stops there: its
// later Y steps are 0 and Y_h/Y_c hold the state after its last step (for the reverse direction,
// the row runs from its own last step back to 0).

#include "kernels/reference/recurrent.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/reference/common.hpp"
#include "kernels/reference/element_types.hpp"
#include "kernels/reference/reference.hpp"

namespace troupe::kernels::reference {

double RecurrentActivation::operator()(double x) const {
  switch (kind) {
    case Kind::sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case Kind::tanh:
      return std::tanh(x);
    case Kind::relu:
      return std::max(x, 0.0);
    case Kind::hard_sigmoid:
      return std::clamp(alpha * x + beta, 0.0, 1.0);
    case Kind::leaky_relu:
      return x >= 0 ? x : alpha * x;
    case Kind::thresholded_relu:
      return x > alpha ? x : 0.0;
    case Kind::scaled_tanh:
      return alpha * std::tanh(beta * x);
    case Kind::affine:
      return alpha * x + beta;
    case Kind::elu:
      return x >= 0 ? x : alpha * (std::exp(x) - 1.0);
    case Kind::softsign:
      return x / (1.0 + std::abs(x));
    case Kind::softplus:
      return std::log1p(std::exp(x));
  }
  return x;
}

namespace {

struct ActivationInfo {
  const char* name;
  RecurrentActivation::Kind kind;
  bool takes_alpha, takes_beta;
  double alpha, beta;  // defaults
};

constexpr ActivationInfo activation_table[] = {
    {"Sigmoid", RecurrentActivation::Kind::sigmoid, false, false, 0, 0},
    {"Tanh", RecurrentActivation::Kind::tanh, false, false, 0, 0},
    {"Relu", RecurrentActivation::Kind::relu, false, false, 0, 0},
    {"HardSigmoid", RecurrentActivation::Kind::hard_sigmoid, true, true, 0.2, 0.5},
    {"LeakyRelu", RecurrentActivation::Kind::leaky_relu, true, false, 0.01, 0},
    {"ThresholdedRelu", RecurrentActivation::Kind::thresholded_relu, true, false, 1.0, 0},
    {"ScaledTanh", RecurrentActivation::Kind::scaled_tanh, true, true, 1.0, 1.0},
    {"Affine", RecurrentActivation::Kind::affine, true, true, 1.0, 0},
    {"Elu", RecurrentActivation::Kind::elu, true, false, 1.0, 0},
    {"Softsign", RecurrentActivation::Kind::softsign, false, false, 0, 0},
    {"Softplus", RecurrentActivation::Kind::softplus, false, false, 0, 0},
};

std::vector<std::string> default_activations(RecurrentSpec::Cell cell) {
  switch (cell) {
    case RecurrentSpec::Cell::rnn:
      return {"Tanh"};
    case RecurrentSpec::Cell::gru:
      return {"Sigmoid", "Tanh"};
    case RecurrentSpec::Cell::lstm:
      return {"Sigmoid", "Tanh", "Tanh"};
  }
  return {};
}

std::vector<std::string> string_list(const Node& node, const std::string& name) {
  if (!node.attributes.has(name)) return {};
  const AttributeValue& value = node.attributes.all().at(name);
  if (const auto* list = std::get_if<std::vector<std::string>>(&value)) return *list;
  if (const auto* one = std::get_if<std::string>(&value)) return {*one};
  fail(node, "attribute " + name + " must be a list of strings");
}

}  // namespace

RecurrentSpec read_recurrent_spec(const Node& node, const Shape& x, const Shape& r) {
  RecurrentSpec spec;
  const auto& a = node.attributes;
  spec.cell = node.op_type == "LSTM"  ? RecurrentSpec::Cell::lstm
              : node.op_type == "GRU" ? RecurrentSpec::Cell::gru
                                      : RecurrentSpec::Cell::rnn;
  spec.gates = spec.cell == RecurrentSpec::Cell::lstm  ? 4
               : spec.cell == RecurrentSpec::Cell::gru ? 3
                                                       : 1;
  const std::string direction = a.get_string_or("direction", "forward");
  spec.directions = direction == "bidirectional" ? 2 : 1;
  spec.reverse = direction == "reverse";
  spec.batch_major = a.get_int_or("layout", 0) == 1;
  spec.seq = spec.batch_major ? x[1] : x[0];
  spec.batch = spec.batch_major ? x[0] : x[1];
  spec.input = x[2];
  spec.hidden = r[2];
  spec.clip = a.get_float_or("clip", 0.0);
  spec.input_forget = a.get_int_or("input_forget", 0) != 0;
  spec.linear_before_reset = a.get_int_or("linear_before_reset", 0) != 0;

  const std::vector<std::string> defaults = default_activations(spec.cell);
  std::vector<std::string> names = string_list(node, "activations");
  if (names.empty())
    for (int64_t d = 0; d < spec.directions; ++d)
      names.insert(names.end(), defaults.begin(), defaults.end());
  const size_t per_direction = defaults.size();
  if (names.size() != per_direction * static_cast<size_t>(spec.directions))
    fail(node, "attribute activations has " + std::to_string(names.size()) + " entries, expected " +
                   std::to_string(per_direction * static_cast<size_t>(spec.directions)));
  const std::vector<double> alphas = a.get_floats_or("activation_alpha", {});
  const std::vector<double> betas = a.get_floats_or("activation_beta", {});
  size_t next_alpha = 0, next_beta = 0;
  spec.activations.resize(static_cast<size_t>(spec.directions));
  for (size_t i = 0; i < names.size(); ++i) {
    const ActivationInfo* info = nullptr;
    for (const ActivationInfo& candidate : activation_table)
      if (names[i] == candidate.name) info = &candidate;
    if (info == nullptr) fail(node, "activation '" + names[i] + "' is not supported");
    RecurrentActivation activation{info->kind, info->alpha, info->beta};
    if (info->takes_alpha && next_alpha < alphas.size()) activation.alpha = alphas[next_alpha++];
    if (info->takes_beta && next_beta < betas.size()) activation.beta = betas[next_beta++];
    spec.default_activations = spec.default_activations && names[i] == defaults[i % per_direction];
    spec.activations[i / per_direction].push_back(activation);
  }
  return spec;
}

namespace {

template <class T>
void run_recurrent(const Node& node, const RecurrentSpec& s, const std::vector<Tensor>& in,
                   std::vector<Tensor>& out) {
  const int64_t G = s.gates, H = s.hidden, I = s.input, D = s.directions;
  auto input = [&](size_t i) -> const T* {
    return i < in.size() && !in[i].empty() ? in[i].data<T>() : nullptr;
  };
  const T* X = input(0);
  const T* W = input(1);
  const T* R = input(2);
  const T* B = input(3);
  const T* initial_h = input(5);
  const T* initial_c = s.cell == RecurrentSpec::Cell::lstm ? input(6) : nullptr;
  const T* P = s.cell == RecurrentSpec::Cell::lstm ? input(7) : nullptr;
  std::vector<int64_t> lengths(static_cast<size_t>(s.batch), s.seq);
  if (in.size() > 4 && !in[4].empty()) {
    lengths = read_ints(node, in[4], "sequence_lens");
    for (int64_t len : lengths)
      if (len < 0 || len > s.seq)
        fail(node,
             "sequence_lens has " + std::to_string(len) + ", expected 0.." + std::to_string(s.seq));
  }
  T* Y = !out.empty() && !out[0].empty() ? out[0].data<T>() : nullptr;
  T* Y_h = out.size() > 1 && !out[1].empty() ? out[1].data<T>() : nullptr;
  T* Y_c = out.size() > 2 && !out[2].empty() ? out[2].data<T>() : nullptr;
  if (Y) std::fill(Y, Y + out[0].size(), store<T>(0.0));

  auto x_at = [&](int64_t t, int64_t b) {
    return X + (s.batch_major ? b * s.seq + t : t * s.batch + b) * I;
  };
  auto y_at = [&](int64_t t, int64_t d, int64_t b) {
    return Y + (s.batch_major ? (b * s.seq + t) * D + d : (t * D + d) * s.batch + b) * H;
  };
  auto state_at = [&](int64_t d, int64_t b) {
    return (s.batch_major ? b * D + d : d * s.batch + b) * H;
  };
  auto clip = [&](double v) { return s.clip > 0 ? std::clamp(v, -s.clip, s.clip) : v; };

  std::vector<double> h(static_cast<size_t>(H)), c(static_cast<size_t>(H));
  std::vector<double> wx(static_cast<size_t>(G * H)), rh(static_cast<size_t>(G * H));
  for (int64_t d = 0; d < D; ++d) {
    const bool backwards = d == 1 || s.reverse;
    const auto& act = s.activations[static_cast<size_t>(d)];
    const T* Wd = W + d * G * H * I;
    const T* Rd = R + d * G * H * H;
    const T* Wb = B ? B + d * 2 * G * H : nullptr;
    const T* Rb = B ? Wb + G * H : nullptr;
    const T* Pd = P ? P + d * 3 * H : nullptr;
    for (int64_t b = 0; b < s.batch; ++b) {
      const int64_t len = lengths[static_cast<size_t>(b)];
      for (int64_t j = 0; j < H; ++j) {
        h[j] = initial_h ? load(initial_h[state_at(d, b) + j]) : 0.0;
        c[j] = initial_c ? load(initial_c[state_at(d, b) + j]) : 0.0;
      }
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = backwards ? len - 1 - step : step;
        const T* xt = x_at(t, b);
        // wx = W x + Wb, rh = R h + Rb, per gate row.
        for (int64_t row = 0; row < G * H; ++row) {
          double sx = Wb ? load(Wb[row]) : 0.0, sh = Rb ? load(Rb[row]) : 0.0;
          for (int64_t k = 0; k < I; ++k) sx += load(Wd[row * I + k]) * load(xt[k]);
          for (int64_t k = 0; k < H; ++k) sh += load(Rd[row * H + k]) * h[k];
          wx[row] = sx;
          rh[row] = sh;
        }
        if (s.cell == RecurrentSpec::Cell::rnn) {
          for (int64_t j = 0; j < H; ++j) h[j] = act[0](clip(wx[j] + rh[j]));
        } else if (s.cell == RecurrentSpec::Cell::gru) {
          std::vector<double> z(H), r(H);
          for (int64_t j = 0; j < H; ++j) {
            z[j] = act[0](clip(wx[j] + rh[j]));
            r[j] = act[0](clip(wx[H + j] + rh[H + j]));
          }
          std::vector<double> candidate(H);
          for (int64_t j = 0; j < H; ++j) {
            double recurrent;
            if (s.linear_before_reset) {
              recurrent = r[j] * rh[2 * H + j];  // r * (Rh h + Rbh)
            } else {
              recurrent = Rb ? load(Rb[2 * H + j]) : 0.0;  // Rh (r * h) + Rbh
              for (int64_t k = 0; k < H; ++k)
                recurrent += load(Rd[(2 * H + j) * H + k]) * r[k] * h[k];
            }
            candidate[j] = act[1](clip(wx[2 * H + j] + recurrent));
          }
          for (int64_t j = 0; j < H; ++j) h[j] = (1.0 - z[j]) * candidate[j] + z[j] * h[j];
        } else {
          for (int64_t j = 0; j < H; ++j) {
            const double peep_i = Pd ? load(Pd[j]) * c[j] : 0.0;
            const double peep_f = Pd ? load(Pd[2 * H + j]) * c[j] : 0.0;
            const double i = act[0](clip(wx[j] + rh[j] + peep_i));
            const double f =
                s.input_forget ? 1.0 - i : act[0](clip(wx[2 * H + j] + rh[2 * H + j] + peep_f));
            const double cell = act[1](clip(wx[3 * H + j] + rh[3 * H + j]));
            c[j] = f * c[j] + i * cell;
            const double peep_o = Pd ? load(Pd[H + j]) * c[j] : 0.0;
            const double o = act[0](clip(wx[H + j] + rh[H + j] + peep_o));
            h[j] = o * act[2](c[j]);
          }
        }
        if (Y)
          for (int64_t j = 0; j < H; ++j) y_at(t, d, b)[j] = store<T>(h[j]);
      }
      for (int64_t j = 0; j < H; ++j) {
        if (Y_h) Y_h[state_at(d, b) + j] = store<T>(h[j]);
        if (Y_c) Y_c[state_at(d, b) + j] = store<T>(c[j]);
      }
    }
  }
}

void recurrent(const Node& node, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const RecurrentSpec spec = read_recurrent_spec(node, in[0].shape(), in[2].shape());
  dispatch_floating(node, in[0].element_type(), [&](auto tag) {
    run_recurrent<typename decltype(tag)::type>(node, spec, in, out);
  });
}

}  // namespace

void register_recurrent(KernelRegistry& registry) {
  for (const char* op : {"RNN", "GRU", "LSTM"})
    registry.add("reference", 0, op,
                 [](const KernelRequest& r) { return make_reference_kernel(r.node, &recurrent); });
}

}  // namespace troupe::kernels::reference
