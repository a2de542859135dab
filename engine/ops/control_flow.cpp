// Schemas of If, Loop and Scan (ONNX opsets 11-16; Scan also in its batched form of opset 8).
// Their output types come from inferring the subgraphs with the node's input types; a dimension
// the subgraphs do not fix (a branch-dependent size, a loop's trip count) is dynamic, and the
// executor runs such graphs node by node.
#include "engine/ops/control_flow.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"
#include "troupe/error.hpp"

namespace troupe {

namespace control_flow {

bool is_control_flow(const std::string& op_type) {
  return op_type == "If" || op_type == "Loop" || op_type == "Scan";
}

size_t formal_inputs(const Node& node) {
  const int64_t formal =
      node.attributes.get_int_or(formal_inputs_attribute, static_cast<int64_t>(node.inputs.size()));
  return std::min(static_cast<size_t>(std::max<int64_t>(formal, 0)), node.inputs.size());
}

bool is_batched_scan(const Node& node) {
  return node.op_type == "Scan" && node.attributes.get_int_or("opset", 9) < 9;
}

size_t body_formal_inputs(const Node& node) {
  if (node.op_type == "If") return 0;
  if (node.op_type == "Loop") return std::max<size_t>(formal_inputs(node), 2);
  if (is_batched_scan(node)) return std::max<size_t>(formal_inputs(node), 1) - 1;
  return formal_inputs(node);
}

std::vector<size_t> captured_inputs(const Node& node, const std::string& attribute,
                                    const std::vector<std::string>& input_names) {
  const Model& body = *node.attributes.get_graph(attribute);
  std::vector<size_t> sources;
  const std::string positions_name = captured_attribute_prefix + attribute;
  if (node.attributes.has(positions_name)) {
    const std::vector<int64_t> positions = node.attributes.get_ints(positions_name);
    if (body_formal_inputs(node) + positions.size() != body.inputs().size())
      throw ModelError(node.op_type + " node '" + node.name + "': subgraph '" + body.name() +
                       "' has " + std::to_string(body.inputs().size()) + " inputs, expected " +
                       std::to_string(body_formal_inputs(node) + positions.size()));
    for (int64_t p : positions) {
      if (p < static_cast<int64_t>(formal_inputs(node)) ||
          p >= static_cast<int64_t>(node.inputs.size()))
        throw ModelError(node.op_type + " node '" + node.name + "': attribute " + positions_name +
                         " names input " + std::to_string(p) + ", which is not a captured input");
      sources.push_back(static_cast<size_t>(p));
    }
    return sources;
  }
  const size_t formal = body_formal_inputs(node);
  for (size_t i = formal; i < body.inputs().size(); ++i) {
    const std::string& name = body.value(body.inputs()[i]).name;
    size_t k = formal_inputs(node);
    while (k < input_names.size() && input_names[k] != name) ++k;
    if (k == input_names.size())
      throw ModelError(node.op_type + " node '" + node.name + "': subgraph '" + body.name() +
                       "' reads '" + name + "', which is not among the node's inputs");
    sources.push_back(k);
  }
  return sources;
}

std::shared_ptr<Model> bind_subgraph(const Node& node, const Model& body,
                                     const std::vector<ValueInfo>& inputs) {
  const std::string where =
      node.op_type + " node '" + node.name + "', subgraph '" + body.name() + "'";
  if (inputs.size() != body.inputs().size())
    throw ModelError(where + " has " + std::to_string(body.inputs().size()) +
                     " inputs, the op gives it " + std::to_string(inputs.size()));
  auto bound = body.clone();
  for (size_t i = 0; i < inputs.size(); ++i) {
    ValueInfo& in = bound->value(bound->inputs()[i]);
    in.type = inputs[i].type;
    in.shape = inputs[i].shape;
  }
  try {
    bound->validate();
  } catch (const UnsupportedOperation&) {
    throw;
  } catch (const Error& e) {
    throw ModelError(where + ": " + e.what());
  }
  return bound;
}

}  // namespace control_flow

namespace {

using namespace control_flow;

// The inputs a subgraph gets: `formal`, then the node's inputs it reads from outside.
std::vector<ValueInfo> subgraph_inputs(const ShapeInferContext& ctx, const std::string& attribute,
                                       std::vector<ValueInfo> formal) {
  std::vector<std::string> names;
  for (const ValueInfo& in : ctx.inputs) names.push_back(in.name);
  for (size_t k : captured_inputs(ctx.node, attribute, names)) formal.push_back(ctx.inputs[k]);
  return formal;
}

std::vector<ValueInfo> outputs_of(const Model& bound) {
  std::vector<ValueInfo> outs;
  for (ValueId o : bound.outputs()) outs.push_back(bound.value(o));
  return outs;
}

// What two runs may give for one value: the same type, and the dimensions they agree on.
ValueInfo merge(const ShapeInferContext& ctx, const ValueInfo& a, const ValueInfo& b,
                const std::string& what) {
  if (a.type != b.type)
    ctx.fail(what + " is " + std::string(to_string(a.type)) + " in one run and " +
             std::string(to_string(b.type)) + " in another");
  if (a.shape.rank() != b.shape.rank())
    infer::unsupported(ctx, what + " changes rank (" + a.shape.to_string() + " vs " +
                                b.shape.to_string() + "); troupe needs a fixed rank");
  std::vector<int64_t> dims;
  for (size_t d = 0; d < a.shape.rank(); ++d)
    dims.push_back(a.shape[d] == b.shape[d] ? a.shape[d] : Shape::dynamic);
  return ValueInfo{"", a.type, Shape(std::move(dims))};
}

const Model& graph_attribute(const ShapeInferContext& ctx, const std::string& name) {
  if (!ctx.node.attributes.has(name)) ctx.fail("attribute '" + name + "' (a graph) is missing");
  return *ctx.node.attributes.get_graph(name);
}

void require_scalar_condition(const ShapeInferContext& ctx, size_t i) {
  infer::require_type(ctx, i, infer::TypeClass::boolean);
  const Shape& s = ctx.shape(i);
  if (s.is_static() && s.element_count() != 1)
    ctx.fail(infer::input_label(ctx, i) + " must hold one value, got shape " + s.to_string());
}

std::vector<ValueInfo> infer_if(const ShapeInferContext& ctx) {
  if (formal_inputs(ctx.node) != 1) ctx.fail("takes exactly one formal input, the condition");
  require_scalar_condition(ctx, 0);
  const Model& then_branch = graph_attribute(ctx, "then_branch");
  const Model& else_branch = graph_attribute(ctx, "else_branch");
  const auto then_out =
      outputs_of(*bind_subgraph(ctx.node, then_branch, subgraph_inputs(ctx, "then_branch", {})));
  const auto else_out =
      outputs_of(*bind_subgraph(ctx.node, else_branch, subgraph_inputs(ctx, "else_branch", {})));
  if (then_out.size() != else_out.size())
    ctx.fail("then_branch has " + std::to_string(then_out.size()) + " outputs, else_branch " +
             std::to_string(else_out.size()));
  if (const Tensor* cond = ctx.constant(0)) return cond->value_at(0) != 0 ? then_out : else_out;
  std::vector<ValueInfo> outs;
  for (size_t o = 0; o < then_out.size(); ++o)
    outs.push_back(merge(ctx, then_out[o], else_out[o], "output " + std::to_string(o)));
  return outs;
}

// Loop(M, cond, v_initial...): body(iteration, cond, v...) -> (cond, v..., scan outputs...).
std::vector<ValueInfo> infer_loop(const ShapeInferContext& ctx) {
  const size_t formal = formal_inputs(ctx.node);
  if (ctx.has_input(0)) {
    infer::require_type(ctx, 0, infer::TypeClass::index);
    if (ctx.shape(0).is_static() && ctx.shape(0).element_count() != 1)
      ctx.fail("input 0 'M' must hold one value, got shape " + ctx.shape(0).to_string());
  }
  if (ctx.has_input(1)) require_scalar_condition(ctx, 1);
  const size_t carried = formal > 2 ? formal - 2 : 0;
  const Model& body = graph_attribute(ctx, "body");
  std::vector<ValueInfo> formal_infos{ValueInfo{"", ElementType::i64, Shape{}},
                                      ValueInfo{"", ElementType::boolean, Shape{}}};
  for (size_t i = 0; i < carried; ++i) {
    if (!ctx.has_input(2 + i))
      ctx.fail("loop-carried input " + std::to_string(2 + i) + " is missing");
    formal_infos.push_back(ctx.inputs[2 + i]);
  }
  const auto body_out = outputs_of(
      *bind_subgraph(ctx.node, body, subgraph_inputs(ctx, "body", std::move(formal_infos))));
  if (body_out.size() < 1 + carried)
    ctx.fail("the body has " + std::to_string(body_out.size()) + " outputs, expected at least " +
             std::to_string(1 + carried) + " (the condition and the loop-carried values)");
  std::vector<ValueInfo> outs;
  for (size_t i = 0; i < carried; ++i)
    outs.push_back(
        merge(ctx, ctx.inputs[2 + i], body_out[1 + i], "loop-carried value " + std::to_string(i)));
  for (size_t k = 1 + carried; k < body_out.size(); ++k) {
    std::vector<int64_t> dims{Shape::dynamic};  // one slice per iteration
    for (int64_t d : body_out[k].shape) dims.push_back(d);
    outs.push_back(ValueInfo{"", body_out[k].type, Shape(std::move(dims))});
  }
  outs.resize(ctx.node.outputs.size());
  return outs;
}

// The number of states of a Scan whose `formal` inputs (sequence_lens left out) are its states
// and then num_scan_inputs scan inputs.
size_t scan_states(const ShapeInferContext& ctx, size_t formal) {
  if (!ctx.node.attributes.has("num_scan_inputs"))
    ctx.fail("attribute 'num_scan_inputs' is missing");
  const int64_t scans = ctx.node.attributes.get_int("num_scan_inputs");
  if (scans < 1 || static_cast<size_t>(scans) > formal)
    ctx.fail("num_scan_inputs is " + std::to_string(scans) + " but the node has " +
             std::to_string(formal) + " states and scan inputs");
  return formal - static_cast<size_t>(scans);
}

// Agrees `dim` of input `i` with what is known so far of a dimension several inputs share.
void agree(const ShapeInferContext& ctx, int64_t& known, size_t i, size_t axis,
           const std::string& what) {
  const int64_t dim = ctx.shape(i)[axis];
  if (dim == Shape::dynamic) return;
  if (known != Shape::dynamic && known != dim)
    ctx.fail(infer::input_label(ctx, i) + " has shape " + ctx.shape(i).to_string() + ", whose " +
             what + " " + std::to_string(dim) + " differs from the other inputs' " +
             std::to_string(known));
  known = dim;
}

std::vector<int64_t> with_leading(std::vector<int64_t> leading, const Shape& rest) {
  leading.insert(leading.end(), rest.dims().begin(), rest.dims().end());
  return leading;
}

// sequence_lens: [B] of i64, each at most the sequence length (checked here when constant).
void check_sequence_lens(const ShapeInferContext& ctx, int64_t batch, int64_t length) {
  if (!ctx.has_input(0)) return;
  if (ctx.type(0) != ElementType::i64)
    ctx.fail("input 0 'sequence_lens' has element type " + std::string(to_string(ctx.type(0))) +
             ", expected i64");
  const Shape& lens = ctx.shape(0);
  if (lens.rank() != 1 ||
      (lens[0] != Shape::dynamic && batch != Shape::dynamic && lens[0] != batch))
    ctx.fail("input 0 'sequence_lens' has shape " + lens.to_string() +
             ", expected [batch size] = [" +
             (batch == Shape::dynamic ? std::string("?") : std::to_string(batch)) + "]");
  const std::optional<std::vector<int64_t>> lengths =
      infer::constant_ints(ctx, 0, "input 0 'sequence_lens'");
  if (!lengths) return;
  for (int64_t n : *lengths)
    if (n < 0 || (length != Shape::dynamic && n > length))
      ctx.fail("input 0 'sequence_lens' holds " + std::to_string(n) + ", outside [0, " +
               (length == Shape::dynamic ? std::string("?") : std::to_string(length)) +
               "] (the scan inputs' sequence length)");
}

void check_directions(const ShapeInferContext& ctx, size_t scans) {
  const std::vector<int64_t> directions = ctx.node.attributes.get_ints_or("directions", {});
  if (!directions.empty() && directions.size() != scans)
    ctx.fail("attribute 'directions' has " + std::to_string(directions.size()) +
             " entries, expected one per scan input (" + std::to_string(scans) + ")");
  for (int64_t d : directions)
    if (d != 0 && d != 1)
      ctx.fail("attribute 'directions' has the entry " + std::to_string(d) + ", expected 0 or 1");
}

// Opset 8: Scan(sequence_lens?, states..., scan_inputs...), every state [B, ...] and scan input
// [B, T, ...]; body(state slices..., scan input slices...) -> (states..., scan output slices...),
// each without the batch (and sequence) axes; outputs: states [B, ...], scan outputs [B, T, ...].
std::vector<ValueInfo> infer_batched_scan(const ShapeInferContext& ctx) {
  const size_t formal = formal_inputs(ctx.node);
  if (formal < 2) ctx.fail("needs sequence_lens (or an empty name) and at least one scan input");
  const size_t states = scan_states(ctx, formal - 1);
  const size_t scans = formal - 1 - states;
  check_directions(ctx, scans);
  int64_t batch = Shape::dynamic;
  int64_t length = Shape::dynamic;
  std::vector<ValueInfo> slices;
  for (size_t s = 0; s < scans; ++s) {
    const size_t i = 1 + states + s;
    const Shape& shape = ctx.shape(i);
    if (shape.rank() < 2)
      ctx.fail(infer::input_label(ctx, i) + " has shape " + shape.to_string() +
               ", expected [batch, sequence, ...]");
    agree(ctx, batch, i, 0, "batch size");
    agree(ctx, length, i, 1, "sequence length");
    slices.push_back(
        ValueInfo{"", ctx.type(i),
                  Shape(std::vector<int64_t>(shape.dims().begin() + 2, shape.dims().end()))});
  }
  std::vector<ValueInfo> formal_infos;
  for (size_t i = 1; i <= states; ++i) {
    const Shape& shape = ctx.shape(i);
    if (shape.rank() < 1)
      ctx.fail("state " + infer::input_label(ctx, i) + " has shape " + shape.to_string() +
               ", expected [batch, ...]");
    agree(ctx, batch, i, 0, "batch size");
    formal_infos.push_back(
        ValueInfo{"", ctx.type(i),
                  Shape(std::vector<int64_t>(shape.dims().begin() + 1, shape.dims().end()))});
  }
  check_sequence_lens(ctx, batch, length);
  formal_infos.insert(formal_infos.end(), slices.begin(), slices.end());
  const auto body_out = outputs_of(*bind_subgraph(ctx.node, graph_attribute(ctx, "body"),
                                                  subgraph_inputs(ctx, "body", formal_infos)));
  if (body_out.size() < states)
    ctx.fail("the body has " + std::to_string(body_out.size()) + " outputs, fewer than the " +
             std::to_string(states) + " states");
  std::vector<ValueInfo> outs;
  for (size_t i = 0; i < states; ++i) {
    const ValueInfo batched{"", body_out[i].type, Shape(with_leading({batch}, body_out[i].shape))};
    outs.push_back(merge(ctx, ctx.inputs[1 + i], batched, "state " + std::to_string(i)));
  }
  for (size_t k = states; k < body_out.size(); ++k)
    outs.push_back(
        ValueInfo{"", body_out[k].type, Shape(with_leading({batch, length}, body_out[k].shape))});
  outs.resize(ctx.node.outputs.size());
  return outs;
}

// Scan(states..., scan_inputs...): body(states..., slices...) -> (states..., scan outputs...).
std::vector<ValueInfo> infer_scan(const ShapeInferContext& ctx) {
  const auto& attrs = ctx.node.attributes;
  if (is_batched_scan(ctx.node)) return infer_batched_scan(ctx);
  const size_t states = scan_states(ctx, formal_inputs(ctx.node));
  const auto scans = static_cast<size_t>(attrs.get_int("num_scan_inputs"));
  const std::vector<int64_t> axes = attrs.get_ints_or("scan_input_axes", {});
  if (!axes.empty() && axes.size() != scans)
    ctx.fail("scan_input_axes has " + std::to_string(axes.size()) + " entries, expected " +
             std::to_string(scans));
  std::vector<ValueInfo> formal_infos(ctx.inputs.begin(),
                                      ctx.inputs.begin() + static_cast<std::ptrdiff_t>(states));
  int64_t length = Shape::dynamic;
  for (size_t s = 0; s < scans; ++s) {
    const Shape& shape = ctx.shape(states + s);
    const size_t axis = infer::normalize_axis(ctx, axes.empty() ? 0 : axes[s], shape.rank());
    std::vector<int64_t> slice;
    for (size_t d = 0; d < shape.rank(); ++d)
      if (d != axis) slice.push_back(shape[d]);
    if (shape[axis] >= 0) {
      if (length >= 0 && shape[axis] != length)
        ctx.fail("scan inputs have different lengths (" + std::to_string(length) + " and " +
                 std::to_string(shape[axis]) + ")");
      length = shape[axis];
    }
    formal_infos.push_back(ValueInfo{"", ctx.type(states + s), Shape(std::move(slice))});
  }
  const Model& body = graph_attribute(ctx, "body");
  const auto body_out = outputs_of(
      *bind_subgraph(ctx.node, body, subgraph_inputs(ctx, "body", std::move(formal_infos))));
  if (body_out.size() < states)
    ctx.fail("the body has " + std::to_string(body_out.size()) + " outputs, fewer than the " +
             std::to_string(states) + " states");
  const std::vector<int64_t> out_axes = attrs.get_ints_or("scan_output_axes", {});
  std::vector<ValueInfo> outs;
  for (size_t i = 0; i < states; ++i)
    outs.push_back(merge(ctx, ctx.inputs[i], body_out[i], "state " + std::to_string(i)));
  for (size_t k = states; k < body_out.size(); ++k) {
    std::vector<int64_t> dims = body_out[k].shape.dims();
    const size_t o = k - states;
    const int64_t axis = o < out_axes.size() ? out_axes[o] : 0;
    const auto rank = static_cast<int64_t>(dims.size()) + 1;
    if (axis < -rank || axis >= rank)
      ctx.fail("scan_output_axes entry " + std::to_string(axis) + " is out of range for rank " +
               std::to_string(rank));
    dims.insert(dims.begin() + (axis < 0 ? axis + rank : axis), length);
    outs.push_back(ValueInfo{"", body_out[k].type, Shape(std::move(dims))});
  }
  outs.resize(ctx.node.outputs.size());
  return outs;
}

}  // namespace

void register_control_flow_ops(OpSchemaRegistry& registry) {
  registry.add(OpSchema{"If", 1, unbounded, 1, unbounded, infer_if});
  registry.add(OpSchema{"Loop", 0, unbounded, 1, unbounded, infer_loop});
  registry.add(OpSchema{"Scan", 1, unbounded, 1, unbounded, infer_scan});
}

}  // namespace troupe
