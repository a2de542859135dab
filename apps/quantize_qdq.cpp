#include "apps/quantize_qdq.hpp"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "troupe/error.hpp"

namespace troupe::apps {

namespace {

const std::set<std::string> product_ops = {"Conv", "Gemm", "MatMul"};
// Ops with int8 kernels of their own (QLinearAdd, QLinearConcat), on calibrated output grids.
const std::set<std::string> combining_ops = {"Add", "Concat"};
// Ops that only move or select values: their output shares the input's grid, so the QDQ fusion
// runs them on the integers (quantized_data_movement.cpp).
const std::set<std::string> moving_ops = {"MaxPool",   "GlobalMaxPool", "Flatten",  "Reshape",
                                          "Transpose", "Squeeze",       "Unsqueeze"};
// Activations the QDQ fusion folds between a product (or Add) and its Q.
const std::set<std::string> fusable_activations = {"Relu", "Clip"};

// Which nodes read each tensor, the graph outputs and the constants.
struct Uses {
  std::unordered_map<std::string, std::vector<int>> readers;
  std::unordered_set<std::string> graph_outputs;
  std::unordered_map<std::string, const onnx::TensorProto*> initializers;
  std::unordered_set<std::string> constants;  // initializers and Constant nodes' outputs

  explicit Uses(const onnx::GraphProto& graph) {
    for (int i = 0; i < graph.node_size(); ++i)
      for (const auto& in : graph.node(i).input())
        if (!in.empty()) readers[in].push_back(i);
    for (const auto& out : graph.output()) graph_outputs.insert(out.name());
    for (const auto& init : graph.initializer()) {
      initializers[init.name()] = &init;
      constants.insert(init.name());
    }
    for (const auto& n : graph.node()) {
      if (n.op_type() == "Constant")
        for (const auto& out : n.output()) constants.insert(out);
      // torch shares equal weights between layers through Identity nodes of one initializer.
      if (n.op_type() == "Identity" && n.input_size() == 1 && n.output_size() == 1)
        if (auto it = initializers.find(n.input(0)); it != initializers.end()) {
          initializers[n.output(0)] = it->second;
          constants.insert(n.output(0));
        }
    }
  }

  const onnx::TensorProto* float_constant(const std::string& name) const {
    auto it = initializers.find(name);
    if (it == initializers.end() || it->second->data_type() != onnx::TensorProto::FLOAT)
      return nullptr;
    return it->second;
  }

  // The tensor a node's result is quantized at: after one fusable activation that is its only
  // reader, else its own output.
  std::string result_of(const onnx::GraphProto& graph, int node) const {
    std::string out = graph.node(node).output(0);
    // torch writes a Linear layer on a 3-D input as MatMul, then Add of its bias vector: the
    // grid goes after the bias, where the QDQ fusion takes the Add in as the product's i32 bias.
    if (graph.node(node).op_type() == "MatMul")
      if (const onnx::NodeProto* add = sole_reader(graph, out); add && add->op_type() == "Add") {
        const std::string& other = add->input(0) == out ? add->input(1) : add->input(0);
        const onnx::TensorProto* bias = float_constant(other);
        if (add->input_size() == 2 && add->input(0) != add->input(1) && bias &&
            bias->dims_size() >= 1) {
          bool vector = true;
          for (int d = 0; d + 1 < bias->dims_size(); ++d) vector = vector && bias->dims(d) == 1;
          if (vector) out = add->output(0);
        }
      }
    if (const onnx::NodeProto* next = sole_reader(graph, out);
        next && fusable_activations.count(next->op_type()) && next->output_size() == 1)
      return next->output(0);
    return out;
  }

  // The one node reading `tensor`, when it is not also a graph output.
  const onnx::NodeProto* sole_reader(const onnx::GraphProto& graph,
                                     const std::string& tensor) const {
    auto it = readers.find(tensor);
    if (it == readers.end() || it->second.size() != 1 || graph_outputs.count(tensor))
      return nullptr;
    return &graph.node(it->second[0]);
  }
};

std::vector<float> float_data(const onnx::TensorProto& t) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    throw ModelError("initializer '" + t.name() +
                     "' keeps its data in an external file, which troupe quantize does not read");
  int64_t count = 1;
  for (int64_t d : t.dims()) count *= d;
  std::vector<float> values(static_cast<size_t>(count));
  if (t.has_raw_data()) {
    if (t.raw_data().size() != values.size() * sizeof(float))
      throw ModelError(fmt::format("initializer '{}' holds {} bytes for {} floats", t.name(),
                                   t.raw_data().size(), count));
    std::memcpy(values.data(), t.raw_data().data(), t.raw_data().size());
  } else {
    if (t.float_data_size() != count)
      throw ModelError(fmt::format("initializer '{}' holds {} floats for its shape's {}", t.name(),
                                   t.float_data_size(), count));
    std::copy(t.float_data().begin(), t.float_data().end(), values.begin());
  }
  return values;
}

template <class T>
onnx::TensorProto make_tensor(const std::string& name, onnx::TensorProto::DataType type,
                              const std::vector<int64_t>& dims, const std::vector<T>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(type);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
  return t;
}

// ONNX QuantizeLinear rounds half to even; so does nearbyint in the default rounding mode.
float round_even(float x) {
  return std::nearbyint(x);
}

struct WeightScales {
  std::vector<float> scales;  // one, or one per channel along axis
  int64_t axis = -1;          // -1: per tensor
};

// Symmetric s8 weights, per channel along `axis` where allowed.
WeightScales quantize_weights(const std::vector<float>& w, const std::vector<int64_t>& dims,
                              int64_t axis, int qmax, std::vector<int8_t>& out) {
  WeightScales result;
  int64_t channels = 1, inner = 1;
  if (axis >= 0) {
    channels = dims[axis];
    for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
    result.axis = axis;
  }
  std::vector<float> max_abs(channels, 0.0f);
  for (size_t i = 0; i < w.size(); ++i) {
    const int64_t c = axis >= 0 ? (static_cast<int64_t>(i) / inner) % channels : 0;
    max_abs[c] = std::max(max_abs[c], std::fabs(w[i]));
  }
  result.scales.resize(channels);
  for (int64_t c = 0; c < channels; ++c)
    result.scales[c] = max_abs[c] > 0.0f ? max_abs[c] / static_cast<float>(qmax) : 1.0f;
  out.resize(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const int64_t c = axis >= 0 ? (static_cast<int64_t>(i) / inner) % channels : 0;
    const float q = round_even(w[i] / result.scales[c]);
    out[i] =
        static_cast<int8_t>(std::clamp(q, static_cast<float>(-qmax), static_cast<float>(qmax)));
  }
  return result;
}

struct ActivationGrid {
  float scale = 1.0f;
  uint8_t zero_point = 0;
};

ActivationGrid u8_grid(const ActivationRange& range) {
  const float lo = std::min(range.lo, 0.0f), hi = std::max(range.hi, 0.0f);
  ActivationGrid grid;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return grid;
  grid.scale = (hi - lo) / 255.0f;
  grid.zero_point = static_cast<uint8_t>(std::clamp(round_even(-lo / grid.scale), 0.0f, 255.0f));
  return grid;
}

class NameSource {
 public:
  explicit NameSource(const onnx::GraphProto& graph) {
    for (const auto& n : graph.node()) {
      taken_.insert(n.name());
      for (const auto& s : n.input()) taken_.insert(s);
      for (const auto& s : n.output()) taken_.insert(s);
    }
    for (const auto& i : graph.initializer()) taken_.insert(i.name());
    for (const auto& i : graph.input()) taken_.insert(i.name());
  }
  std::string operator()(const std::string& wanted) {
    std::string name = wanted;
    for (int k = 1; taken_.count(name); ++k) name = wanted + "_" + std::to_string(k);
    taken_.insert(name);
    return name;
  }

 private:
  std::unordered_set<std::string> taken_;
};

onnx::NodeProto make_node(const std::string& op, const std::string& name,
                          const std::vector<std::string>& inputs, const std::string& output,
                          int64_t axis = -1) {
  onnx::NodeProto node;
  node.set_op_type(op);
  node.set_name(name);
  for (const auto& in : inputs) node.add_input(in);
  node.add_output(output);
  if (axis >= 0) {
    auto* a = node.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(axis);
  }
  return node;
}

// Adds the integers `values` as an initializer with its scales (one per channel along `axis`,
// or one for -1) and zero points 0, and a DequantizeLinear of them to `emit`; returns the name
// the DequantizeLinear writes.
template <class T>
std::string add_dequantized_constant(onnx::GraphProto& graph, NameSource& names,
                                     const std::string& base, onnx::TensorProto::DataType type,
                                     const std::vector<int64_t>& dims, const std::vector<T>& values,
                                     const std::vector<float>& scales, int64_t axis,
                                     std::vector<onnx::NodeProto>& emit) {
  const std::vector<int64_t> param_dims =
      axis >= 0 ? std::vector<int64_t>{static_cast<int64_t>(scales.size())}
                : std::vector<int64_t>{};
  const std::string data = names(base + "_quantized"), scale = names(base + "_scale"),
                    zero = names(base + "_zero_point"), output = names(base + "_dequantized");
  *graph.add_initializer() = make_tensor<T>(data, type, dims, values);
  *graph.add_initializer() =
      make_tensor<float>(scale, onnx::TensorProto::FLOAT, param_dims,
                         axis >= 0 ? scales : std::vector<float>{scales.at(0)});
  *graph.add_initializer() =
      make_tensor<T>(zero, type, param_dims, std::vector<T>(axis >= 0 ? scales.size() : 1));
  emit.push_back(make_node("DequantizeLinear", names(base + "_DequantizeLinear"),
                           {data, scale, zero}, output, axis));
  return output;
}

// The channel axis of a product's weight, or -1 for per tensor.
int64_t weight_axis(const onnx::NodeProto& node, size_t rank) {
  if (node.op_type() == "Conv") return 0;
  if (rank != 2) return -1;
  if (node.op_type() == "MatMul") return 1;
  for (const auto& a : node.attribute())
    if (a.name() == "transB" && a.i() != 0) return 0;
  return 1;  // Gemm without transB: B is [K, N]
}

bool excluded(const onnx::NodeProto& node, const QdqSettings& settings) {
  return settings.exclude.count(node.op_type()) ||
         (!node.name().empty() && settings.exclude.count(node.name()));
}

// The model with onnx's inferred types and shapes as value_info; data propagation follows
// shapes computed in the graph (Shape -> Gather -> Concat -> Reshape, as torch exports flatten).
onnx::ModelProto with_inferred_shapes(const onnx::ModelProto& model) {
  onnx::ModelProto inferred = model;
  try {
    onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(false, 0, true));
  } catch (const std::exception& e) {
    throw ModelError(std::string("onnx's shape inference fails on the model: ") + e.what());
  }
  return inferred;
}

}  // namespace

QdqPlan plan_qdq(const onnx::ModelProto& model, const QdqSettings& settings) {
  const int64_t opset = onnx_opset(model);
  if (opset < 10)
    throw ModelError(fmt::format(
        "the model imports opset {} of the default domain; QuantizeLinear needs 10 or later "
        "(re-export it with opset 13 or later for per-channel weights)",
        opset));
  const auto& graph = model.graph();
  const Uses uses(graph);
  // Only float tensors go on a u8 grid (a Concat of int64 shape values stays as it is): their
  // types from onnx's inference.
  const onnx::ModelProto inferred = with_inferred_shapes(model);
  std::unordered_set<std::string> floats;
  for (const auto* list :
       {&inferred.graph().input(), &inferred.graph().value_info(), &inferred.graph().output()})
    for (const auto& v : *list)
      if (v.type().tensor_type().elem_type() == onnx::TensorProto::FLOAT) floats.insert(v.name());
  auto activation = [&](const std::string& name) {
    return !name.empty() && floats.count(name) && !uses.constants.count(name);
  };
  QdqPlan plan;
  std::vector<bool> selected(graph.node_size(), false);
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto& node = graph.node(i);
    if (excluded(node, settings) || node.input_size() < 2) continue;
    if (product_ops.count(node.op_type())) {
      // A constant float weight (the activations times a learned matrix), not x * y.
      if (!uses.float_constant(node.input(1)) || !activation(node.input(0))) continue;
      if (node.op_type() == "Gemm") {
        bool plain = true;
        for (const auto& a : node.attribute())
          if (a.name() == "transA" && a.i() != 0) plain = false;
        if (!plain) continue;
      }
      selected[i] = true;
      plan.products.push_back(i);
    }
  }
  // Add, Concat and the data movement ops are quantized only where every reader of their
  // result is: a quantized Add feeding a LayerNormalization would put the residual stream on a
  // u8 grid for nothing. Start from all of them and drop those with a float reader until none
  // changes.
  std::vector<int> candidates;
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto& node = graph.node(i);
    const bool combining = combining_ops.count(node.op_type()) > 0;
    if ((!combining && !moving_ops.count(node.op_type())) || excluded(node, settings)) continue;
    if (node.output_size() != 1 || node.input_size() == 0) continue;
    // Combining ops read only activations; data movement reads one (its shape inputs stay).
    bool float_inputs = activation(node.input(0));
    if (combining)
      for (const auto& in : node.input()) float_inputs = float_inputs && activation(in);
    if (float_inputs) {
      selected[i] = true;
      candidates.push_back(i);
    }
  }
  // Whether selected node r reads `tensor` on its grid: products and data movement quantize
  // their input 0 only (a Reshape's shape stays int64), combining ops every input.
  auto reads_quantized = [&](int r, const std::string& tensor) {
    const auto& node = graph.node(r);
    if (combining_ops.count(node.op_type())) return true;
    return node.input(0) == tensor &&
           std::count(node.input().begin(), node.input().end(), tensor) == 1;
  };
  auto result_tensor = [&](int i) {
    return moving_ops.count(graph.node(i).op_type()) ? graph.node(i).output(0)
                                                     : uses.result_of(graph, i);
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (int i : candidates) {
      if (!selected[i]) continue;
      const std::string result = result_tensor(i);
      bool all_quantized = !uses.graph_outputs.count(result);
      auto it = uses.readers.find(result);
      if (it == uses.readers.end())
        all_quantized = false;
      else
        for (int r : it->second)
          all_quantized = all_quantized && selected[r] && reads_quantized(r, result);
      if (!all_quantized) {
        selected[i] = false;
        changed = true;
      }
    }
  }
  for (int i : candidates)
    if (selected[i]) {
      plan.propagating.push_back(i);
      if (moving_ops.count(graph.node(i).op_type()))
        plan.shared_range[graph.node(i).output(0)] = graph.node(i).input(0);
    }
  if (plan.products.empty())
    throw ModelError(
        "the model has no Conv, Gemm or MatMul with a constant float weight to quantize (or "
        "--exclude names them all)");

  // The activations: every float input of a selected node that is not a constant, in the
  // order the graph computes them (graph inputs first).
  // A product's result is quantized even where a float op reads it (through its
  // DequantizeLinear), so the product itself runs as one int8 kernel, as ONNX Runtime's
  // quantizer does; a graph output stays float.
  std::unordered_set<std::string> wanted;
  for (int i : plan.products) {
    const std::string result = uses.result_of(graph, i);
    if (!uses.graph_outputs.count(result)) wanted.insert(result);
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    if (!selected[i]) continue;
    const auto& node = graph.node(i);
    const int count = combining_ops.count(node.op_type()) ? node.input_size() : 1;
    for (int k = 0; k < count; ++k)
      if (activation(node.input(k))) wanted.insert(node.input(k));
  }
  for (const auto& in : graph.input())
    if (wanted.count(in.name())) plan.activations.push_back(in.name());
  for (const auto& node : graph.node())
    for (const auto& out : node.output())
      if (wanted.count(out)) plan.activations.push_back(out);
  return plan;
}

onnx::ModelProto rewrite_qdq(const onnx::ModelProto& model, const QdqPlan& plan,
                             const std::map<std::string, ActivationRange>& ranges,
                             const QdqSettings& settings, const std::vector<int>& only_products) {
  const auto& graph = model.graph();
  const Uses uses(graph);
  const bool per_channel = settings.per_channel && onnx_opset(model) >= 13;
  const int qmax = settings.reduce_range ? 63 : 127;

  // The propagating nodes need nothing of their own: their inputs and results are among the
  // activations.
  std::set<int> products(plan.products.begin(), plan.products.end());
  std::unordered_set<std::string> activations(plan.activations.begin(), plan.activations.end());
  if (!only_products.empty()) {
    // One layer alone: its input and result only; nothing downstream stays quantized.
    products = std::set<int>(only_products.begin(), only_products.end());
    activations.clear();
    for (int i : products) {
      activations.insert(graph.node(i).input(0));
      const std::string result = uses.result_of(graph, i);
      if (!uses.graph_outputs.count(result)) activations.insert(result);
    }
  }

  onnx::ModelProto out = model;
  auto* g = out.mutable_graph();
  g->clear_node();
  NameSource names(graph);

  // Per tensor quantized: the name its readers read instead (the DQ output) and its scale.
  std::unordered_map<std::string, std::string> dequantized;
  std::unordered_map<std::string, float> activation_scale;
  std::vector<onnx::NodeProto> qdq_after_input;
  auto quantize_activation = [&](const std::string& tensor, std::vector<onnx::NodeProto>& emit) {
    std::string source = tensor;  // data movement: the grid of the tensor it moves
    for (auto it = plan.shared_range.find(source); it != plan.shared_range.end();
         it = plan.shared_range.find(source))
      source = it->second;
    auto range = ranges.find(source);
    if (range == ranges.end())
      throw InvalidArgument("no calibrated range for activation '" + tensor + "'");
    const ActivationGrid grid = u8_grid(range->second);
    const std::string scale = names(tensor + "_scale"), zero = names(tensor + "_zero_point");
    *g->add_initializer() = make_tensor<float>(scale, onnx::TensorProto::FLOAT, {}, {grid.scale});
    *g->add_initializer() =
        make_tensor<uint8_t>(zero, onnx::TensorProto::UINT8, {}, {grid.zero_point});
    const std::string q = names(tensor + "_quantized"), dq = names(tensor + "_dequantized");
    emit.push_back(
        make_node("QuantizeLinear", names(tensor + "_QuantizeLinear"), {tensor, scale, zero}, q));
    emit.push_back(
        make_node("DequantizeLinear", names(tensor + "_DequantizeLinear"), {q, scale, zero}, dq));
    dequantized[tensor] = dq;
    activation_scale[tensor] = grid.scale;
  };

  for (const auto& in : graph.input())
    if (activations.count(in.name())) quantize_activation(in.name(), qdq_after_input);
  for (auto& n : qdq_after_input) *g->add_node() = std::move(n);

  std::unordered_set<std::string> replaced_initializers;
  for (int i = 0; i < graph.node_size(); ++i) {
    onnx::NodeProto node = graph.node(i);
    std::vector<onnx::NodeProto> before, after;
    if (products.count(i)) {
      const onnx::TensorProto& w = *uses.float_constant(node.input(1));
      const std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
      const int64_t axis = per_channel ? weight_axis(node, dims.size()) : -1;
      std::vector<int8_t> wq;
      const WeightScales scales = quantize_weights(float_data(w), dims, axis, qmax, wq);
      replaced_initializers.insert(node.input(1));
      node.set_input(1, add_dequantized_constant(*g, names, node.input(1), onnx::TensorProto::INT8,
                                                 dims, wq, scales.scales, scales.axis, before));

      // The bias as i32 in units of x_scale * w_scale[c], as integer kernels add it.
      const onnx::TensorProto* b =
          node.input_size() > 2 ? uses.float_constant(node.input(2)) : nullptr;
      auto x_scale = activation_scale.find(graph.node(i).input(0));
      const int64_t channels = b && b->dims_size() == 1 ? b->dims(0) : -1;
      if (channels > 0 && x_scale != activation_scale.end() &&
          (scales.axis < 0 || channels == static_cast<int64_t>(scales.scales.size()))) {
        const std::vector<float> bias = float_data(*b);
        std::vector<float> bias_scales(scales.scales.size());
        for (size_t c = 0; c < bias_scales.size(); ++c)
          bias_scales[c] = x_scale->second * scales.scales[c];
        std::vector<int32_t> bq(bias.size());
        for (size_t c = 0; c < bias.size(); ++c) {
          const double q =
              std::nearbyint(static_cast<double>(bias[c]) / bias_scales[scales.axis >= 0 ? c : 0]);
          bq[c] = static_cast<int32_t>(
              std::clamp(q, static_cast<double>(std::numeric_limits<int32_t>::min()),
                         static_cast<double>(std::numeric_limits<int32_t>::max())));
        }
        replaced_initializers.insert(node.input(2));
        node.set_input(2, add_dequantized_constant(*g, names, node.input(2),
                                                   onnx::TensorProto::INT32, {channels}, bq,
                                                   bias_scales, scales.axis >= 0 ? 0 : -1, before));
      }
    }
    // Every reader of a quantized tensor reads its DequantizeLinear.
    for (int k = 0; k < node.input_size(); ++k) {
      auto it = dequantized.find(node.input(k));
      if (it != dequantized.end()) node.set_input(k, it->second);
    }
    for (const auto& o : node.output())
      if (activations.count(o)) quantize_activation(o, after);
    for (auto& n : before) *g->add_node() = std::move(n);
    *g->add_node() = std::move(node);
    for (auto& n : after) *g->add_node() = std::move(n);
  }

  // Drop the float weights no node reads any more.
  std::unordered_set<std::string> read;
  for (const auto& n : g->node())
    for (const auto& in : n.input()) read.insert(in);
  for (const auto& o : g->output()) read.insert(o.name());
  auto* inits = g->mutable_initializer();
  inits->erase(std::remove_if(inits->begin(), inits->end(),
                              [&](const onnx::TensorProto& t) {
                                return replaced_initializers.count(t.name()) &&
                                       !read.count(t.name());
                              }),
               inits->end());
  return out;
}

onnx::ModelProto with_extra_outputs(const onnx::ModelProto& model,
                                    const std::vector<std::string>& tensors,
                                    const std::map<std::string, std::vector<int64_t>>& shapes) {
  // A graph output needs its type and shape; onnx's shape inference gives the intermediate ones.
  const onnx::ModelProto inferred = with_inferred_shapes(model);
  std::unordered_map<std::string, const onnx::ValueInfoProto*> info;
  for (const auto& v : inferred.graph().value_info()) info[v.name()] = &v;
  for (const auto& v : inferred.graph().input()) info[v.name()] = &v;
  onnx::ModelProto out = model;
  std::unordered_set<std::string> present;
  for (const auto& o : model.graph().output()) present.insert(o.name());
  for (const auto& name : tensors) {
    if (!present.insert(name).second) continue;
    if (auto known = shapes.find(name); known != shapes.end()) {
      auto* o = out.mutable_graph()->add_output();
      o->set_name(name);
      auto* tensor = o->mutable_type()->mutable_tensor_type();
      tensor->set_elem_type(onnx::TensorProto::FLOAT);
      auto* shape = tensor->mutable_shape();
      for (int64_t d : known->second) {
        if (d >= 0)
          shape->add_dim()->set_dim_value(d);
        else
          shape->add_dim();  // dynamic
      }
      continue;
    }
    auto it = info.find(name);
    if (it == info.end() || !it->second->type().tensor_type().has_shape())
      throw ModelError("onnx's shape inference gives no shape for activation '" + name +
                       "', which calibration needs to read it (--exclude its readers to keep them "
                       "fp32)");
    *out.mutable_graph()->add_output() = *it->second;
  }
  return out;
}

onnx::ModelProto read_onnx_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument("cannot open the model '" + path + "'");
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in) || !model.has_graph())
    throw ModelError("'" + path + "' is not an ONNX model (it does not parse as a ModelProto)");
  return model;
}

int64_t onnx_opset(const onnx::ModelProto& model) {
  for (const auto& opset : model.opset_import())
    if (opset.domain().empty() || opset.domain() == "ai.onnx") return opset.version();
  return 0;
}

void save_onnx_model(const onnx::ModelProto& model, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !model.SerializeToOstream(&out) || !out.flush())
    throw InvalidArgument("cannot write the model '" + path + "'");
}

void write_onnx_model(const onnx::ModelProto& model, const std::string& path) {
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw Error(std::string("the quantized model fails onnx's checker (a troupe bug): ") +
                e.what());
  }
  save_onnx_model(model, path);
}

}  // namespace troupe::apps
