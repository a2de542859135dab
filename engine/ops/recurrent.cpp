// Schemas of the recurrent layers RNN, GRU and LSTM (ONNX opset 7-22 semantics, layout 0 and 1).
// Inputs: X, W, R[, B, sequence_lens, initial_h[, initial_c, P]]; outputs Y[, Y_h[, Y_c]].

#include <string>
#include <vector>

#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"

namespace troupe {

using infer::dim_text;
using infer::TypeClass;

namespace {

int64_t gate_count(const std::string& op_type) {
  return op_type == "LSTM" ? 4 : op_type == "GRU" ? 3 : 1;
}

// Fails unless `shape` is [dims...] where dynamic dimensions on either side match anything.
void require_shape(const ShapeInferContext& ctx, size_t input, const std::string& name,
                   const std::vector<int64_t>& dims) {
  const Shape& s = ctx.shape(input);
  bool ok = s.rank() == dims.size();
  for (size_t i = 0; ok && i < dims.size(); ++i)
    ok = s[i] == Shape::dynamic || dims[i] == Shape::dynamic || s[i] == dims[i];
  if (!ok) {
    std::string expected = "[";
    for (size_t i = 0; i < dims.size(); ++i) expected += (i ? "," : "") + dim_text(dims[i]);
    ctx.fail("input " + name + " has shape " + s.to_string() + ", expected " + expected + "]");
  }
}

std::vector<ValueInfo> infer_recurrent(const ShapeInferContext& ctx) {
  const std::string& op = ctx.node.op_type;
  const auto& a = ctx.node.attributes;
  for (size_t i : {0, 1, 2}) {
    infer::require_type(ctx, i, TypeClass::floating);
    infer::require_same_type(ctx, 0, i);
  }
  const std::string direction = a.get_string_or("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    ctx.fail("attribute direction is '" + direction +
             "', expected forward, reverse or bidirectional");
  const int64_t directions = direction == "bidirectional" ? 2 : 1;
  const int64_t layout = a.get_int_or("layout", 0);
  if (layout != 0 && layout != 1)
    ctx.fail("attribute layout is " + std::to_string(layout) + ", expected 0 or 1");
  const int64_t gates = gate_count(op);

  const Shape& x = ctx.shape(0);
  if (x.rank() != 3)
    ctx.fail("input X has shape " + x.to_string() +
             (layout == 0 ? ", expected [seq_length, batch_size, input_size]"
                          : ", expected [batch_size, seq_length, input_size]"));
  const int64_t seq = layout == 0 ? x[0] : x[1];
  const int64_t batch = layout == 0 ? x[1] : x[0];
  const int64_t input_size = x[2];
  const Shape& r = ctx.shape(2);
  int64_t hidden = a.get_int_or("hidden_size", r.rank() == 3 ? r[2] : Shape::dynamic);
  if (hidden != Shape::dynamic && hidden <= 0)
    ctx.fail("attribute hidden_size is " + std::to_string(hidden) + ", expected > 0");
  require_shape(ctx, 1, "W", {directions, infer::mul_dims(gates, hidden), input_size});
  require_shape(ctx, 2, "R", {directions, infer::mul_dims(gates, hidden), hidden});
  if (ctx.has_input(3)) {
    infer::require_same_type(ctx, 0, 3);
    require_shape(ctx, 3, "B", {directions, infer::mul_dims(2 * gates, hidden)});
  }
  if (ctx.has_input(4)) {
    if (ctx.type(4) != ElementType::i32 && ctx.type(4) != ElementType::i64)
      ctx.fail("input sequence_lens has element type " + std::string(to_string(ctx.type(4))) +
               ", expected i32");
    require_shape(ctx, 4, "sequence_lens", {batch});
  }
  const std::vector<int64_t> state = layout == 0 ? std::vector<int64_t>{directions, batch, hidden}
                                                 : std::vector<int64_t>{batch, directions, hidden};
  if (ctx.has_input(5)) {
    infer::require_same_type(ctx, 0, 5);
    require_shape(ctx, 5, "initial_h", state);
  }
  if (op == "LSTM") {
    if (ctx.has_input(6)) {
      infer::require_same_type(ctx, 0, 6);
      require_shape(ctx, 6, "initial_c", state);
    }
    if (ctx.has_input(7)) {
      infer::require_same_type(ctx, 0, 7);
      require_shape(ctx, 7, "P", {directions, infer::mul_dims(3, hidden)});
    }
  }
  if (a.has("clip") && !(a.get_float("clip") > 0)) ctx.fail("attribute clip must be positive");

  const ElementType type = ctx.type(0);
  const Shape y =
      layout == 0 ? Shape{seq, directions, batch, hidden} : Shape{batch, seq, directions, hidden};
  std::vector<ValueInfo> outputs = {infer::value_info(type, y),
                                    infer::value_info(type, Shape(state))};
  if (op == "LSTM") outputs.push_back(infer::value_info(type, Shape(state)));
  return outputs;
}

}  // namespace

void register_recurrent_ops(OpSchemaRegistry& registry) {
  registry.add(OpSchema{"RNN", 3, 6, 0, 2, infer_recurrent});
  registry.add(OpSchema{"GRU", 3, 6, 0, 2, infer_recurrent});
  registry.add(OpSchema{"LSTM", 3, 8, 0, 3, infer_recurrent});
}

}  // namespace troupe
