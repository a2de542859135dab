// Folds the QDQ form of a quantized model into integer nodes. Quantizers (ONNX Runtime's,
// PyTorch's) write a quantized layer as float ops between DequantizeLinear and QuantizeLinear:
//   DQ(x_q) , DQ(w_q) [, bias] -> Conv/MatMul/Gemm [-> Add(bias)] [-> activation] -> Q -> y_q
// which, run as written, is a float model with extra passes over memory. This pass replaces each
// such chain by one QLinearConv / QLinearMatMul reading x_q and writing y_q, whose fast kernel
// computes in int8. The fused node computes what the chain specifies (the same integer result,
// up to a rounding tie). A quantized Add, DQ(a) + DQ(b) [-> activation] -> Q, becomes one
// QLinearAdd pass computing the same f32 steps, and a Concat of dequantized inputs followed by a
// Q one QLinearConcat requantizing each input into its place, and element-wise float ops
// between a DQ and a Q (Hardswish, Sigmoid, Clip, ...) one QLinearLookup: a 256-entry table.
//
// The residual Add is not fused into the convolution before it as a sum post-op: that skips the
// rounding of the convolution's output to its grid, and over a ResNet-18 it moved the output by
// up to 5 quantization steps from the model's own answer.
//
// Fused only where the int8 kernels are fast and exact on this CPU: constant s8 weights with zero
// points 0 (per tensor or per output channel), per-tensor activations, and without VNNI u8
// activations with 7-bit weights (kernels/int8_exactness.hpp). Anything else keeps its float
// form, which the constant folding then turns into float weights, so it runs as the float model
// it describes.
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/graph/transformations/transformations.hpp"
#include "engine/ops/quantized_post_ops.hpp"
#include "kernels/int8_exactness.hpp"
#include "kernels/kernel_registry.hpp"

namespace troupe::transformations {

namespace {

// A QuantizeLinear or DequantizeLinear node with constant parameters.
struct Linear {
  int node = -1;
  ValueId data = no_value;  // the integer side: DQ's input, Q's output
  ValueId scale = no_value;
  ValueId zero_point = no_value;  // no_value when omitted
  const Tensor* scale_data = nullptr;
  const Tensor* zero_data = nullptr;

  bool per_tensor() const { return scale_data->size() == 1; }
  double scale_at(int64_t i) const { return scale_data->value_at(per_tensor() ? 0 : i); }
  double zero_at(int64_t i) const {
    return zero_data == nullptr ? 0.0 : zero_data->value_at(per_tensor() ? 0 : i);
  }
};

std::optional<Linear> linear_node(const Model& model, Rewrite& rewrite, int index,
                                  const char* op_type) {
  if (index < 0) return std::nullopt;
  const Node& node = rewrite.node(index);
  if (node.op_type != op_type || node.inputs.size() < 2 || node.inputs.size() > 3 ||
      node.outputs.size() != 1)
    return std::nullopt;
  Linear q;
  q.node = index;
  q.data = std::string(op_type) == "DequantizeLinear" ? node.inputs[0] : node.outputs[0];
  q.scale = node.inputs[1];
  q.scale_data = f32_constant(model, q.scale);
  if (q.scale_data == nullptr || q.scale_data->size() == 0) return std::nullopt;
  if (node.inputs.size() == 3 && node.inputs[2] != no_value) {
    q.zero_point = node.inputs[2];
    if (!model.is_constant(q.zero_point)) return std::nullopt;
    q.zero_data = &model.constants().at(q.zero_point);
  }
  for (int64_t i = 0; i < q.scale_data->size(); ++i)
    if (!(q.scale_data->value_at(i) > 0.0) || !std::isfinite(q.scale_data->value_at(i)))
      return std::nullopt;
  return q;
}

// The axis a DQ/Q node's per-axis parameters run along, normalized for a value of `rank`.
int64_t linear_axis(const Node& node, size_t rank) {
  const int64_t axis = node.attributes.get_int_or("axis", 1);
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

bool is_8bit(ElementType type) {
  return type == ElementType::u8 || type == ElementType::i8;
}

class QdqFusion {
 public:
  QdqFusion(Model& model, OriginalNames& names)
      : model_(model), rewrite_(model, names), uses_(count_uses(model)) {}

  size_t fuse_products() {
    for (size_t i = 0; i < rewrite_.nodes().size(); ++i) {
      const int index = static_cast<int>(i);
      if (rewrite_.removed(index)) continue;
      const std::string& op = rewrite_.node(index).op_type;
      if (op == "Conv" || op == "MatMul" || op == "Gemm") fuse_product(index);
      if (op == "Add") fuse_add(index);
      if (op == "BatchNormalization") fuse_batch_norm(index);
      if (op == "Concat") fuse_concat(index);
      if (op == "QuantizeLinear") fuse_lookup(index);
    }
    return rewrite_.commit();
  }

 private:
  // What a fused node writes: the activation alone reading `value` (if any) and the per-tensor
  // QuantizeLinear after it, with the nodes they absorb appended to `absorbed`; nullopt (and
  // `absorbed` untouched) when no quantizer ends the chain.
  struct QuantizedOutput {
    std::optional<Attributes> activation;
    Linear y;
  };
  std::optional<QuantizedOutput> quantized_output(ValueId value, std::vector<int>& absorbed) {
    std::vector<int> chain;  // appended to `absorbed` only when a quantizer ends it
    const std::optional<Attributes> activation = activation_after(value, chain);
    const std::optional<Linear> y = quantizer(value);
    if (!y) return std::nullopt;
    chain.push_back(y->node);
    absorbed.insert(absorbed.end(), chain.begin(), chain.end());
    return QuantizedOutput{activation, *y};
  }

  static void set_activation(Node& node, const std::optional<Attributes>& activation) {
    if (activation)
      for (const auto& [key, value] : activation->all()) node.attributes.set(key, value);
  }

  // DQ(a) + DQ(b) [-> activation] -> Q  =>  QLinearAdd (the same f32 steps in one pass).
  void fuse_add(int index) {
    const Node add = rewrite_.node(index);
    if (!is_op(add, "Add", 2)) return;
    const std::optional<Linear> a = dequantizer(add.inputs[0]);
    const std::optional<Linear> b = dequantizer(add.inputs[1]);
    if (!a || !b || !a->per_tensor() || !b->per_tensor()) return;
    std::vector<int> absorbed{index};
    const std::optional<QuantizedOutput> out = quantized_output(add.outputs[0], absorbed);
    if (!out) return;
    const Linear& y = out->y;
    Node fused;
    fused.name = add.name;
    fused.op_type = "QLinearAdd";
    set_activation(fused, out->activation);
    fused.inputs = {a->data,  a->scale,       zero_point(*a), b->data,
                    b->scale, zero_point(*b), y.scale,        zero_point(y)};
    fused.outputs = {y.data};
    rewrite_.replace(index, std::move(fused), absorbed);
  }

  // BatchNormalization(x) [-> Relu] -> Q  =>  QuantizingBatchNormalization: one pass from the
  // f32 input to the quantized output instead of an f32 output written and read back (DenseNet's
  // and pre-activation networks' normalizations, which no convolution can absorb). A
  // normalization after a float convolution is left to the BatchNorm folding, which removes it.
  void fuse_batch_norm(int index) {
    const Node bn = rewrite_.node(index);
    if (!is_op(bn, "BatchNormalization", 5) || bn.attributes.get_int_or("training_mode", 0) != 0 ||
        model_.value(bn.inputs[0]).type != ElementType::f32)
      return;
    for (size_t i = 1; i < 5; ++i)
      if (!f32_constant(model_, bn.inputs[i])) return;
    const int producer = rewrite_.producer(bn.inputs[0]);
    if (producer >= 0 && (rewrite_.node(producer).op_type == "Conv" ||
                          rewrite_.node(producer).op_type == "ConvTranspose"))
      return;
    std::vector<int> absorbed{index};
    const std::optional<QuantizedOutput> out = quantized_output(bn.outputs[0], absorbed);
    if (!out) return;
    // The fast kernel applies Relu or nothing; another activation stays a float node.
    if (out->activation && out->activation->get_string_or("fused_activation", "") != "Relu") return;
    Node fused;
    fused.name = bn.name;
    fused.op_type = "QuantizingBatchNormalization";
    fused.attributes.set("epsilon",
                         static_cast<double>(bn.attributes.get_float_or("epsilon", 1e-5)));
    set_activation(fused, out->activation);
    fused.inputs = {bn.inputs[0], bn.inputs[1], bn.inputs[2],      bn.inputs[3],
                    bn.inputs[4], out->y.scale, zero_point(out->y)};
    fused.outputs = {out->y.data};
    rewrite_.replace(index, std::move(fused), absorbed);
  }

  // Concat(DQ(x_1), DQ(x_2), ...) -> Q  =>  QLinearConcat (each input requantized in place).
  void fuse_concat(int index) {
    const Node concat = rewrite_.node(index);
    if (concat.outputs.size() != 1 || concat.inputs.empty()) return;
    const std::optional<Linear> y = quantizer(concat.outputs[0]);
    if (!y) return;
    Node fused;
    fused.name = concat.name;
    fused.op_type = "QLinearConcat";
    fused.attributes = concat.attributes;
    fused.inputs = {y->scale, zero_point(*y)};
    for (ValueId input : concat.inputs) {
      const std::optional<Linear> x = dequantizer(input);
      if (!x || !x->per_tensor()) return;
      fused.inputs.push_back(x->data);
      fused.inputs.push_back(x->scale);
      fused.inputs.push_back(zero_point(*x));
    }
    fused.outputs = {y->data};
    rewrite_.replace(index, std::move(fused), {index, y->node});
  }

  // Element-wise float ops computing a Q's input from DQs of one 8-bit value x  =>
  // QLinearLookup(x, table). Hardswish written as DQ(x) * HardSigmoid(DQ(x)) -> Q, a Sigmoid or a
  // Clip between a DQ and a Q: the output depends on the one 8-bit input value alone, so the
  // nodes are tabulated for all 256 of them with the reference kernels (exactly what they compute
  // as written) and run as one table read per element.
  void fuse_lookup(int index) {
    const std::optional<Linear> q = linear_node(model_, rewrite_, index, "QuantizeLinear");
    if (!q || !q->per_tensor() || !is_8bit(model_.value(q->data).type)) return;
    const ValueId root = rewrite_.node(index).inputs[0];
    if (root == no_value || uses_[static_cast<size_t>(root)] != 1) return;
    // The nodes behind the Q's input, up to DQ nodes of one value.
    std::set<int> members;
    std::vector<int> pending{rewrite_.producer(root)};
    ValueId source = no_value;
    bool computes = false;  // some node besides the DQs: DQ -> Q alone is a requantization
    while (!pending.empty()) {
      const int n = pending.back();
      pending.pop_back();
      if (n < 0) return;
      if (!members.insert(n).second) continue;
      const Node& node = rewrite_.node(n);
      if (node.op_type == "DequantizeLinear") {
        const std::optional<Linear> dq = dequantizer(node.outputs[0]);
        if (!dq || !dq->per_tensor() || (source != no_value && dq->data != source)) return;
        source = dq->data;
        continue;
      }
      if (!is_tabulable(node)) return;
      computes = true;
      for (ValueId in : node.inputs)
        if (in != no_value && !model_.is_constant(in)) pending.push_back(rewrite_.producer(in));
    }
    if (!computes || source == no_value || members.size() > 64) return;
    // Nothing outside reads what the members compute (the Q reads the root).
    std::map<ValueId, int> reads;
    for (int n : members)
      for (ValueId in : rewrite_.node(n).inputs)
        if (in != no_value) ++reads[in];
    for (int n : members)
      for (ValueId out : rewrite_.node(n).outputs)
        if (out != root &&
            (is_model_output(model_, out) || reads[out] != uses_[static_cast<size_t>(out)]))
          return;
    std::vector<int> order(members.begin(), members.end());  // node order is topological
    order.push_back(index);
    const std::optional<Tensor> table = tabulate(order, source, model_.value(q->data).type);
    if (!table) return;
    Node fused;
    fused.name = rewrite_.node(order[order.size() - 2]).name;
    fused.op_type = "QLinearLookup";
    fused.inputs = {source,
                    model_.add_constant(unique_value_name(model_, fused.name + "/table"), *table)};
    fused.outputs = {q->data};
    rewrite_.replace(index, std::move(fused), order);
  }

  // A node whose output element is a function of the same elements of its non-constant inputs
  // alone: a unary float op, Clip with constant bounds, or arithmetic with constant scalars.
  bool is_tabulable(const Node& node) const {
    static const std::set<std::string> unary = {
        "Abs",       "Relu",      "Sign",       "Neg",   "Sqrt",
        "Exp",       "Log",       "Reciprocal", "Floor", "Ceil",
        "Round",     "Erf",       "Sin",        "Cos",   "Sigmoid",
        "Tanh",      "LeakyRelu", "Elu",        "Selu",  "HardSigmoid",
        "HardSwish", "Softplus",  "Softsign",   "Gelu",  "ThresholdedRelu",
        "Celu",      "Shrink",    "Clip"};
    static const std::set<std::string> binary = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
    const bool is_unary = unary.count(node.op_type) > 0;
    if ((!is_unary && !binary.count(node.op_type)) || node.outputs.size() != 1 ||
        node.inputs.empty() || model_.value(node.outputs[0]).type != ElementType::f32)
      return false;
    const Shape& shape = model_.value(node.outputs[0]).shape;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const ValueId in = node.inputs[i];
      if (in == no_value) continue;
      if (model_.is_constant(in)) {
        // Clip's bounds; an operand of the arithmetic only as a scalar (no broadcast along x).
        if (i == 0 || (!is_unary && model_.constants().at(in).size() != 1)) return false;
      } else if ((is_unary && i > 0) || model_.value(in).shape != shape) {
        return false;
      }
    }
    return true;
  }

  // Runs `order` (the DQs and element-wise nodes, then the Q) on every value of `source`'s type
  // with the reference kernels; entry k is the output for input k (u8) or k - 128 (i8). nullopt
  // when a node cannot be evaluated (the nodes then stay as written).
  std::optional<Tensor> tabulate(const std::vector<int>& order, ValueId source,
                                 ElementType out_type) {
    const ElementType in_type = model_.value(source).type;
    std::map<ValueId, Tensor> values;
    Tensor x(in_type, Shape{256});
    auto* bytes = static_cast<uint8_t*>(x.raw_data());
    for (int k = 0; k < 256; ++k)
      bytes[k] = static_cast<uint8_t>(in_type == ElementType::u8 ? k : k - 128);
    values.emplace(source, std::move(x));
    for (size_t c = 0; c < order.size(); ++c) {
      const Node& node = rewrite_.node(order[c]);
      kernels::KernelRequest request{node, {}, {}};
      std::vector<Tensor> inputs;
      for (ValueId in : node.inputs) {
        const auto computed = in == no_value ? values.end() : values.find(in);
        if (computed != values.end()) {
          request.inputs.push_back(
              ValueInfo{"", computed->second.element_type(), computed->second.shape()});
          request.constant_inputs.push_back(nullptr);
          inputs.push_back(computed->second);
        } else if (in != no_value && model_.is_constant(in)) {
          const Tensor& constant = model_.constants().at(in);
          request.inputs.push_back(model_.value(in));
          request.constant_inputs.push_back(&constant);
          inputs.push_back(constant);
        } else if (in == no_value) {
          request.inputs.push_back(ValueInfo{});
          request.constant_inputs.push_back(nullptr);
          inputs.emplace_back();
        } else {
          return std::nullopt;
        }
      }
      const ElementType type = c + 1 == order.size() ? out_type : ElementType::f32;
      request.outputs.push_back(ValueInfo{"", type, Shape{256}});
      std::optional<std::vector<Tensor>> outputs = run_reference_kernel(request, inputs);
      if (!outputs) return std::nullopt;
      values[node.outputs[0]] = std::move((*outputs)[0]);
      if (c + 1 == order.size()) return values[node.outputs[0]];
    }
    return std::nullopt;
  }

  // The DequantizeLinear producing `value`, with per-tensor parameters unless `per_axis_ok`.
  std::optional<Linear> dequantizer(ValueId value) {
    std::optional<Linear> dq =
        linear_node(model_, rewrite_, rewrite_.producer(value), "DequantizeLinear");
    if (!dq || !is_8bit(model_.value(dq->data).type)) return std::nullopt;
    return dq;
  }

  // The QuantizeLinear alone reading `value`, per tensor, into u8 or i8.
  std::optional<Linear> quantizer(ValueId value) {
    std::optional<Linear> q =
        linear_node(model_, rewrite_, rewrite_.sole_reader(value), "QuantizeLinear");
    if (!q || !q->per_tensor() || !is_8bit(model_.value(q->data).type)) return std::nullopt;
    return q;
  }

  // The zero point of `q` as a value: a constant zero of its integer side's type, in its scale's
  // shape, when omitted.
  ValueId zero_point(const Linear& q) {
    if (q.zero_point != no_value) return q.zero_point;
    Tensor zero(model_.value(q.data).type, q.scale_data->shape());
    std::fill_n(static_cast<uint8_t*>(zero.raw_data()), zero.byte_size(), uint8_t{0});
    return model_.add_constant(unique_value_name(model_, "qdq/zero_point"), zero);
  }

  // The activation alone reading `value` (its attributes), moving `value` past it.
  std::optional<Attributes> activation_after(ValueId& value, std::vector<int>& absorbed) {
    const int reader = rewrite_.sole_reader(value);
    if (reader < 0) return std::nullopt;
    const Node& node = rewrite_.node(reader);
    std::optional<Attributes> activation = fused_activation_of(model_, node, value);
    if (!activation || model_.value(node.outputs[0]).type != ElementType::f32) return std::nullopt;
    absorbed.push_back(reader);
    value = node.outputs[0];
    return activation;
  }

  // The bias of a product as i32 in units of x_scale * w_scale[m], from a constant f32 vector or
  // a DequantizeLinear of a constant; nullopt when it is neither or does not fit.
  std::optional<Tensor> integer_bias(ValueId bias, int64_t channels, double x_scale,
                                     const Linear& weights) {
    std::vector<double> real(static_cast<size_t>(channels));
    if (const Tensor* f = f32_constant(model_, bias)) {
      if (f->size() != channels) return std::nullopt;
      for (int64_t m = 0; m < channels; ++m) real[static_cast<size_t>(m)] = f->value_at(m);
    } else {
      std::optional<Linear> dq =
          linear_node(model_, rewrite_, rewrite_.producer(bias), "DequantizeLinear");
      if (!dq || !model_.is_constant(dq->data)) return std::nullopt;
      const Tensor& data = model_.constants().at(dq->data);
      if (data.size() != channels || (!dq->per_tensor() && dq->scale_data->size() != channels))
        return std::nullopt;
      for (int64_t m = 0; m < channels; ++m)
        real[static_cast<size_t>(m)] = (data.value_at(m) - dq->zero_at(m)) * dq->scale_at(m);
    }
    Tensor result(ElementType::i32, Shape{channels});
    for (int64_t m = 0; m < channels; ++m) {
      const double q =
          std::nearbyint(real[static_cast<size_t>(m)] / (x_scale * weights.scale_at(m)));
      if (!(std::fabs(q) < 2e9)) return std::nullopt;
      result.data<int32_t>()[m] = static_cast<int32_t>(q);
    }
    return result;
  }

  // Whether `t` holds `n` values along the last axis only ([n], [1, n], [1, 1, n], ...).
  static bool is_last_axis_vector(const Tensor& t, int64_t n) {
    const Shape& shape = t.shape();
    if (shape.rank() == 0 || shape[shape.rank() - 1] != n) return false;
    for (size_t i = 0; i + 1 < shape.rank(); ++i)
      if (shape[i] != 1) return false;
    return true;
  }

  // Conv, MatMul or Gemm between dequantized operands and a quantizer -> QLinearConv/QLinearMatMul.
  void fuse_product(int index) {
    const Node product = rewrite_.node(index);
    const bool conv = product.op_type == "Conv";
    const bool gemm = product.op_type == "Gemm";
    if (product.outputs.size() != 1 || product.inputs.size() < 2 || fused::is_fused(product))
      return;
    if (gemm && (product.attributes.get_int_or("transA", 0) != 0 ||
                 product.attributes.get_float_or("alpha", 1.0) != 1.0 ||
                 product.attributes.get_float_or("beta", 1.0) != 1.0))
      return;
    if (!conv && !gemm && product.inputs.size() != 2) return;

    const std::optional<Linear> x = dequantizer(product.inputs[0]);
    const std::optional<Linear> w = dequantizer(product.inputs[1]);
    if (!x || !w || !x->per_tensor() || !model_.is_constant(w->data)) return;
    const Tensor& w_data = model_.constants().at(w->data);
    const Shape& w_shape = w_data.shape();
    if (w_data.element_type() != ElementType::i8 || w_shape.rank() < 2) return;
    // Output channels: Conv's W [M, C/g, k..]; MatMul's B [.., K, N]; Gemm's B [K, N] or, with
    // transB, [N, K]. Per-axis weight parameters must run along them.
    const bool trans_b = gemm && product.attributes.get_int_or("transB", 0) != 0;
    const size_t channel_axis = conv || trans_b ? 0 : w_shape.rank() - 1;
    if (!conv && !gemm && w_shape.rank() != 2) return;
    const int64_t channels = w_shape[channel_axis];
    if (!w->per_tensor()) {
      const Node& dq_node = rewrite_.node(w->node);
      if (linear_axis(dq_node, w_shape.rank()) != static_cast<int64_t>(channel_axis) ||
          w->scale_data->size() != channels)
        return;
    }
    for (int64_t m = 0; m < w->scale_data->size(); ++m)
      if (w->zero_at(m) != 0.0) return;  // oneDNN's int8 weights are symmetric
    const bool depthwise =
        conv && w_shape[1] == 1 && product.attributes.get_int_or("group", 1) == channels;
    if (!kernels::int8_product_pays(model_.value(x->data).type, w_data, depthwise)) return;

    std::optional<Tensor> bias;
    if (product.inputs.size() > 2 && product.inputs[2] != no_value) {
      bias = integer_bias(product.inputs[2], channels, x->scale_at(0), *w);
      if (!bias) return;
    }

    std::vector<int> absorbed{index};
    ValueId result = product.outputs[0];
    if (!conv && !gemm && !bias) {
      // torch exports a Linear layer on a 3-D input as MatMul then Add of its bias: the Add
      // joins the product as its i32 bias.
      const int reader = rewrite_.sole_reader(result);
      if (reader >= 0) {
        const Node& add = rewrite_.node(reader);
        if (is_op(add, "Add", 2)) {
          const ValueId other = add.inputs[0] == result ? add.inputs[1] : add.inputs[0];
          const Tensor* vector = f32_constant(model_, other);
          if (vector && add.inputs[0] != add.inputs[1] && is_last_axis_vector(*vector, channels) &&
              model_.value(add.outputs[0]).shape == model_.value(result).shape) {
            bias = integer_bias(other, channels, x->scale_at(0), *w);
            if (bias) {
              absorbed.push_back(reader);
              result = add.outputs[0];
            }
          }
        }
      }
    }
    const std::optional<QuantizedOutput> out = quantized_output(result, absorbed);
    // A MatMul/Gemm no QuantizeLinear reads (a classifier's last layer, a language model's head)
    // still computes in int8, into f32; ONNX Runtime does the same (MatMulIntegerToFloat).
    const bool float_output = !out && !conv && model_.value(result).type == ElementType::f32;
    if (!out && !float_output) return;
    std::optional<Attributes> activation;
    if (float_output) {
      activation = activation_after(result, absorbed);
    } else {
      activation = out->activation;
    }

    Node fused;
    fused.name = product.name;
    fused.op_type = conv ? "QLinearConv" : "QLinearMatMul";
    if (conv) fused.attributes = product.attributes;
    set_activation(fused, activation);
    ValueId weights = w->data;
    if (trans_b) {
      Tensor transposed(ElementType::i8, Shape{w_shape[1], w_shape[0]});
      const Tensor dense = w_data.contiguous();
      const int8_t* from = dense.data<int8_t>();
      int8_t* to = transposed.data<int8_t>();
      for (int64_t n = 0; n < w_shape[0]; ++n)
        for (int64_t k = 0; k < w_shape[1]; ++k) to[k * w_shape[0] + n] = from[n * w_shape[1] + k];
      weights = model_.add_constant(unique_value_name(model_, product.name + "/weights_kn"),
                                    std::move(transposed));
    }
    if (float_output) {
      fused.attributes.set("fused_float_output", int64_t{1});
      fused.inputs = {x->data,  x->scale,       zero_point(*x), weights,
                      w->scale, zero_point(*w), no_value,       no_value};
    } else {
      fused.inputs = {x->data,  x->scale,       zero_point(*x), weights,
                      w->scale, zero_point(*w), out->y.scale,   zero_point(out->y)};
    }
    if (bias) {
      fused.inputs.push_back(
          model_.add_constant(unique_value_name(model_, product.name + "/bias_i32"), *bias));
      if (!conv) fused.attributes.set("fused_bias", int64_t{1});
    }
    fused.outputs = {float_output ? result : out->y.data};
    rewrite_.replace(index, std::move(fused), absorbed);
  }

  Model& model_;
  Rewrite rewrite_;
  std::vector<int>
      uses_;  // readers per value of the model as it came (conservative after rewrites)
};

}  // namespace

size_t fuse_qdq(Model& model, OriginalNames& names) {
  return QdqFusion(model, names).fuse_products();
}

}  // namespace troupe::transformations
