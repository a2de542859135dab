#pragma once

// What an RNN, GRU or LSTM node asks for, read once from its attributes and input shapes: the
// reference kernel and the fast one (kernels/dnnl/recurrent.cpp) both run from it.

#include <cstdint>
#include <string>
#include <vector>

#include "troupe/model.hpp"
#include "troupe/shape.hpp"

namespace troupe::kernels::reference {

/// One activation function of a recurrent cell, with its ONNX alpha/beta.
struct RecurrentActivation {
  enum class Kind {
    sigmoid,
    tanh,
    relu,
    hard_sigmoid,
    leaky_relu,
    thresholded_relu,
    scaled_tanh,
    affine,
    elu,
    softsign,
    softplus
  };
  Kind kind = Kind::sigmoid;
  double alpha = 0;
  double beta = 0;
  double operator()(double x) const;
};

struct RecurrentSpec {
  enum class Cell { rnn, gru, lstm };
  Cell cell = Cell::lstm;
  int64_t gates = 4;         // per cell: 1, 3, 4 (ONNX gate orders: i | z r h | i o f c)
  int64_t directions = 1;    // 2 when bidirectional
  bool reverse = false;      // a single direction that runs backwards
  bool batch_major = false;  // layout 1: X [batch, seq, input], states [batch, dirs, hidden]
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  double clip = 0;  // 0: none
  bool input_forget = false;
  bool linear_before_reset = false;
  /// Per direction, the cell's activations in ONNX order (f, g[, h]).
  std::vector<std::vector<RecurrentActivation>> activations;
  /// Whether every activation is the ONNX default (what fast kernels implement).
  bool default_activations = true;
};

/// Reads the node's attributes against its input shapes (X, W, R, ...); throws ExecutionError
/// naming the node on an unsupported activation or inconsistent attribute.
RecurrentSpec read_recurrent_spec(const Node& node, const Shape& x, const Shape& r);

}  // namespace troupe::kernels::reference
