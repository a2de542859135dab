#include "engine/graph/subgraph_runner.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "engine/graph/clock.hpp"
#include "engine/graph/compiled_graph.hpp"
#include "engine/graph/thread_policy.hpp"
#include "engine/ops/control_flow.hpp"
#include "engine/ops/op_schema.hpp"
#include "engine/ops/selection.hpp"
#include "kernels/kernel_registry.hpp"
#include "troupe/error.hpp"

namespace troupe::detail {

std::vector<ValueInfo> infer_from_data(const Model& model, const Node& node,
                                       const std::vector<Tensor>& inputs) {
  const OpSchema* schema = OpSchemaRegistry::instance().find(node.op_type);
  if (!schema) throw UnsupportedOperation(node.op_type + " node '" + node.name + "': no schema");
  ShapeInferContext ctx{node, {}, {}};
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] == no_value) {
      ctx.inputs.emplace_back();
      ctx.constant_inputs.push_back(nullptr);
      continue;
    }
    const Tensor& t = inputs[i];
    ctx.inputs.push_back(ValueInfo{model.value(node.inputs[i]).name, t.element_type(), t.shape()});
    ctx.constant_inputs.push_back(&t);
  }
  std::vector<ValueInfo> infos;
  try {
    infos = schema->infer(ctx);
  } catch (const ModelError& e) {
    // The model was valid; these inputs are not (e.g. a computed shape that does not fit).
    throw ExecutionError(e.what());
  }
  infos.resize(node.outputs.size());
  for (size_t o = 0; o < infos.size(); ++o)
    if (!infos[o].shape.is_static())
      throw UnsupportedOperation(node.op_type + " node '" + node.name + "': output '" +
                                 model.value(node.outputs[o]).name +
                                 "' has a shape that cannot be inferred even from the data (" +
                                 infos[o].shape.to_string() + ")");
  return infos;
}

kernels::Kernel& ShapedKernels::get(const Model& model, const Node& node, ElementType precision,
                                    const std::vector<Tensor>& inputs,
                                    const std::vector<ValueInfo>& outputs) {
  std::vector<Shape> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  for (auto& entry : entries_)
    if (entry.input_shapes == shapes) return *entry.kernel;
  kernels::KernelRequest request = KernelRequests(model, precision)(node);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (node.inputs[i] != no_value) {
      request.inputs[i].type = inputs[i].element_type();
      request.inputs[i].shape = inputs[i].shape();
    }
  for (size_t o = 0; o < outputs.size(); ++o) {
    request.outputs[o].type = outputs[o].type;
    request.outputs[o].shape = outputs[o].shape;
  }
  request.threads =
      node_threads(node, request.inputs, request.outputs, detail::current_omp_threads());
  auto kernel = kernels::KernelRegistry::instance().create(request);
  if (!kernel)
    throw UnsupportedOperation(node.op_type + " node '" + node.name +
                               "': no CPU kernel for these shapes/types");
  // Few distinct shapes are expected per node; a node whose shapes never repeat keeps a handful.
  constexpr size_t kept = 8;
  if (entries_.size() >= kept) entries_.erase(entries_.begin());
  entries_.push_back({std::move(shapes), std::move(kernel)});
  return *entries_.back().kernel;
}

void execute_node(kernels::Kernel& kernel, const Node& node, const std::vector<Tensor>& in,
                  std::vector<Tensor>& out) {
  std::optional<ScopedOmpThreads> threads;
  if (kernel.threads() > 0) threads.emplace(kernel.threads());
  try {
    kernel.execute(in, out);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw ExecutionError(node.op_type + " node '" + node.name + "' failed: " + e.what());
  }
}

namespace {

std::vector<std::string> input_names(const Model& model, const Node& node) {
  std::vector<std::string> names;
  for (ValueId v : node.inputs) names.push_back(v == no_value ? "" : model.value(v).name);
  return names;
}

[[noreturn]] void fail(const Node& node, const std::string& message) {
  throw ExecutionError(node.op_type + " node '" + node.name + "': " + message);
}

bool condition_of(const Node& node, const Tensor& t, const std::string& what) {
  if (t.size() != 1) fail(node, what + " must hold one value, it has " + std::to_string(t.size()));
  return t.value_at(0) != 0;
}

Tensor scalar_i64(int64_t v) {
  return Tensor::from_vector<int64_t>(Shape{}, {v});
}

Tensor scalar_bool(bool v) {
  Tensor t(ElementType::boolean, Shape{});
  t.data<bool>()[0] = v;
  return t;
}

// Slice t of `x` along `axis` (the axis dropped).
Tensor slice_along(const Tensor& x, size_t axis, int64_t t) {
  std::vector<int64_t> dims = x.shape().dims();
  const selection::SliceGeometry s = selection::slices_of(x.shape(), static_cast<int64_t>(axis));
  dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(axis));
  Tensor out(x.element_type(), Shape(dims));
  const size_t es = element_size(x.element_type());
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t o = 0; o < s.outer; ++o)
    std::memcpy(dst + static_cast<size_t>(o * s.inner) * es,
                src + static_cast<size_t>((o * s.count + t) * s.inner) * es,
                static_cast<size_t>(s.inner) * es);
  return out;
}

// The slices stacked along a new `axis`; slice i goes to position `positions[i]`. `empty`: the
// shape when there are no slices.
Tensor stack_along(const Node& node, const std::vector<Tensor>& slices, size_t axis,
                   const std::vector<int64_t>& positions, const ValueInfo& empty) {
  if (slices.empty()) {
    std::vector<int64_t> dims;
    for (size_t d = 0; d < empty.shape.rank(); ++d)
      dims.push_back(d == axis ? 0 : std::max<int64_t>(empty.shape[d], 0));
    return Tensor(empty.type, Shape(dims));
  }
  const Tensor& first = slices.front();
  for (const Tensor& s : slices)
    if (s.shape() != first.shape() || s.element_type() != first.element_type())
      fail(node, "iterations produced scan outputs of different shapes (" +
                     first.shape().to_string() + " and " + s.shape().to_string() + ")");
  std::vector<int64_t> dims = first.shape().dims();
  if (axis > dims.size())
    fail(node, "scan output axis " + std::to_string(axis) + " is out of range");
  dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(axis),
              static_cast<int64_t>(slices.size()));
  Tensor out(first.element_type(), Shape(dims));
  const selection::SliceGeometry s = selection::slices_of(out.shape(), static_cast<int64_t>(axis));
  const size_t es = element_size(first.element_type());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (size_t i = 0; i < slices.size(); ++i) {
    const auto* src = static_cast<const uint8_t*>(slices[i].raw_data());
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(dst + static_cast<size_t>((o * s.count + positions[i]) * s.inner) * es,
                  src + static_cast<size_t>(o * s.inner) * es, static_cast<size_t>(s.inner) * es);
  }
  return out;
}

// An opset-8 Scan's sequence_lens: one length per batch entry, each within the scan inputs'
// `length`; every entry runs the whole length when the input is omitted.
std::vector<int64_t> sequence_lengths(const Node& node, const Tensor& lens, int64_t batch,
                                      int64_t length) {
  if (lens.empty()) return std::vector<int64_t>(static_cast<size_t>(batch), length);
  if (lens.element_type() != ElementType::i64 || lens.shape().rank() != 1 ||
      lens.shape()[0] != batch)
    fail(node, "sequence_lens is " + std::string(to_string(lens.element_type())) + " " +
                   lens.shape().to_string() + ", expected i64 [" + std::to_string(batch) + "]");
  std::vector<int64_t> lengths = lens.to_vector<int64_t>();
  for (size_t b = 0; b < lengths.size(); ++b)
    if (lengths[b] < 0 || lengths[b] > length)
      fail(node, "sequence_lens[" + std::to_string(b) + "] is " + std::to_string(lengths[b]) +
                     ", outside [0, " + std::to_string(length) +
                     "] (the scan inputs' sequence length)");
  return lengths;
}

// One batch entry's scan output, [length, slice...]: its `steps` slices first, then zeros where a
// shorter sequence ended (ONNX leaves those values undefined). `slice`: the slices' type and shape.
Tensor padded_sequence(const std::vector<Tensor>& steps, int64_t length, const ValueInfo& slice) {
  std::vector<int64_t> dims{length};
  dims.insert(dims.end(), slice.shape.dims().begin(), slice.shape.dims().end());
  Tensor out(slice.type, Shape(std::move(dims)));
  const size_t bytes = static_cast<size_t>(slice.shape.element_count()) * element_size(slice.type);
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (size_t t = 0; t < steps.size(); ++t)
    std::memcpy(dst + t * bytes, steps[t].raw_data(), bytes);
  return out;
}

// Scan output k of an opset-8 Scan, [batch, length, slice...]: each batch entry's steps (`steps`:
// per entry, per scan output, per step), padded to `length`. `inferred`: the output's inferred
// type and shape, which give the slices' when no entry ran a step.
Tensor batched_scan_output(const Node& node,
                           const std::vector<std::vector<std::vector<Tensor>>>& steps, size_t k,
                           int64_t length, const ValueInfo& inferred) {
  if (inferred.shape.rank() < 2)
    fail(node, "scan output " + std::to_string(k) + " has the inferred shape " +
                   inferred.shape.to_string() + ", expected [batch, sequence, ...]");
  ValueInfo slice{
      "", inferred.type,
      Shape(std::vector<int64_t>(inferred.shape.dims().begin() + 2, inferred.shape.dims().end()))};
  for (const auto& entry_steps : steps)
    if (!entry_steps[k].empty()) {
      slice.type = entry_steps[k].front().element_type();
      slice.shape = entry_steps[k].front().shape();
      break;
    }
  if (!slice.shape.is_static())
    fail(node, "scan output " + std::to_string(k) +
                   " has no step to take its shape from and an inferred shape " +
                   inferred.shape.to_string());
  std::vector<Tensor> padded;
  for (const auto& entry_steps : steps) {
    for (const Tensor& step : entry_steps[k])
      if (step.shape() != slice.shape || step.element_type() != slice.type)
        fail(node, "iterations produced scan outputs of different shapes (" +
                       slice.shape.to_string() + " and " + step.shape().to_string() + ")");
    padded.push_back(padded_sequence(entry_steps[k], length, slice));
  }
  std::vector<int64_t> entries(steps.size());
  for (size_t b = 0; b < steps.size(); ++b) entries[b] = static_cast<int64_t>(b);
  return stack_along(node, padded, 0, entries, inferred);
}

size_t normalized(const Node& node, int64_t axis, size_t rank, const std::string& what) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    fail(node,
         what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

}  // namespace

// ---- GraphInterpreter ---------------------------------------------------------------------------

GraphInterpreter::GraphInterpreter(std::shared_ptr<const Model> model, ElementType precision)
    : model_(std::move(model)),
      precision_(precision),
      kernels_(model_->nodes().size()),
      control_(model_->nodes().size()) {}

GraphInterpreter::~GraphInterpreter() = default;

std::vector<Tensor> GraphInterpreter::run(
    const std::vector<Tensor>& inputs,
    const std::vector<std::unique_ptr<kernels::Kernel>>* prepared, std::vector<OpTiming>* timings) {
  const Model& model = *model_;
  if (inputs.size() != model.inputs().size())
    throw ExecutionError("subgraph '" + model.name() + "' given " + std::to_string(inputs.size()) +
                         " inputs, it has " + std::to_string(model.inputs().size()));
  std::vector<Tensor> values(model.values().size());
  for (const auto& [id, tensor] : model.constants()) values[id] = tensor;
  for (size_t i = 0; i < inputs.size(); ++i) values[model.inputs()[i]] = inputs[i];
  if (timings) timings->assign(model.nodes().size(), {});
  std::vector<Tensor> in;
  std::vector<Tensor> out;
  for (size_t n = 0; n < model.nodes().size(); ++n) {
    const Node& node = model.nodes()[n];
    in.clear();
    for (ValueId v : node.inputs) in.push_back(v == no_value ? Tensor() : values[v]);
    const int64_t t0 = timings ? now_ns() : 0;
    const int64_t c0 = timings ? thread_cpu_ns() : 0;
    kernels::Kernel* kernel = prepared ? (*prepared)[n].get() : nullptr;
    if (kernel) {
      out.clear();
      for (ValueId v : node.outputs) out.emplace_back(model.value(v).type, model.value(v).shape);
      execute_node(*kernel, node, in, out);
    } else if (control_flow::is_control_flow(node.op_type)) {
      if (!control_[n]) {
        std::vector<ValueInfo> infos;
        for (ValueId v : node.outputs) infos.push_back(model.value(v));
        control_[n] = std::make_unique<ControlFlowRunner>(node, input_names(model, node),
                                                          std::move(infos), precision_);
      }
      out = control_[n]->run(in);
    } else {
      const std::vector<ValueInfo> infos = infer_from_data(model, node, in);
      out.clear();
      for (const ValueInfo& info : infos) out.emplace_back(info.type, info.shape);
      execute_node(kernels_[n].get(model, node, precision_, in, infos), node, in, out);
    }
    for (size_t o = 0; o < node.outputs.size() && o < out.size(); ++o)
      values[node.outputs[o]] = std::move(out[o]);
    if (timings) (*timings)[n] = {now_ns() - t0, thread_cpu_ns() - c0, t0};
  }
  std::vector<Tensor> outputs;
  for (ValueId o : model.outputs()) outputs.push_back(values[o]);
  return outputs;
}

// ---- ControlFlowRunner --------------------------------------------------------------------------

ControlFlowRunner::ControlFlowRunner(const Node& node, const std::vector<std::string>& input_names,
                                     std::vector<ValueInfo> outputs, ElementType precision)
    : node_(node), outputs_(std::move(outputs)), precision_(precision) {
  if (node.op_type == "If") {
    bodies_.push_back(body("then_branch", input_names));
    bodies_.push_back(body("else_branch", input_names));
  } else {
    bodies_.push_back(body("body", input_names));
  }
}

ControlFlowRunner::~ControlFlowRunner() = default;

ControlFlowRunner::Body ControlFlowRunner::body(const std::string& attribute,
                                                const std::vector<std::string>& input_names) const {
  const Subgraph& graph = node_.attributes.get_graph(attribute);
  Body b;
  b.captured = control_flow::captured_inputs(node_, attribute, input_names);
  b.interpreter = std::make_unique<GraphInterpreter>(graph, precision_);
  return b;
}

std::vector<Tensor> ControlFlowRunner::run_body(Body& body, std::vector<Tensor> formal,
                                                const std::vector<Tensor>& inputs) {
  for (size_t k : body.captured) formal.push_back(inputs[k]);
  return body.interpreter->run(formal);
}

std::vector<Tensor> ControlFlowRunner::run(const std::vector<Tensor>& inputs) {
  if (node_.op_type == "If") return run_if(inputs);
  if (node_.op_type == "Loop") return run_loop(inputs);
  return run_scan(inputs);
}

std::vector<Tensor> ControlFlowRunner::run_if(const std::vector<Tensor>& inputs) {
  const bool condition = condition_of(node_, inputs.at(0), "the condition");
  return run_body(bodies_[condition ? 0 : 1], {}, inputs);
}

std::vector<Tensor> ControlFlowRunner::run_loop(const std::vector<Tensor>& inputs) {
  const size_t formal = control_flow::formal_inputs(node_);
  const size_t carried_count = formal > 2 ? formal - 2 : 0;
  const bool bounded = formal > 0 && !inputs[0].empty();
  int64_t trip_count = 0;
  if (bounded) {
    if (inputs[0].size() != 1)
      fail(node_, "M must hold one value, it has " + std::to_string(inputs[0].size()));
    trip_count = static_cast<int64_t>(inputs[0].value_at(0));
  }
  bool condition = formal > 1 && !inputs[1].empty() ? condition_of(node_, inputs[1], "cond") : true;
  std::vector<Tensor> carried;
  for (size_t c = 0; c < carried_count; ++c) carried.push_back(inputs[2 + c]);
  std::vector<std::vector<Tensor>> scans;
  int64_t i = 0;
  for (; (!bounded || i < trip_count) && condition; ++i) {
    std::vector<Tensor> formal_inputs{scalar_i64(i), scalar_bool(condition)};
    formal_inputs.insert(formal_inputs.end(), carried.begin(), carried.end());
    std::vector<Tensor> out = run_body(bodies_[0], std::move(formal_inputs), inputs);
    if (out.size() < 1 + carried_count)
      fail(node_, "the body returned " + std::to_string(out.size()) + " outputs");
    condition = condition_of(node_, out[0], "the body's condition output");
    for (size_t c = 0; c < carried_count; ++c) carried[c] = std::move(out[1 + c]);
    scans.resize(out.size() - 1 - carried_count);
    for (size_t k = 0; k < scans.size(); ++k)
      scans[k].push_back(std::move(out[1 + carried_count + k]));
  }
  std::vector<Tensor> results = std::move(carried);
  const size_t scan_outputs = outputs_.size() > carried_count ? outputs_.size() - carried_count : 0;
  scans.resize(std::max(scans.size(), scan_outputs));
  std::vector<int64_t> positions(static_cast<size_t>(i));
  for (int64_t p = 0; p < i; ++p) positions[static_cast<size_t>(p)] = p;
  for (size_t k = 0; k < scans.size() && carried_count + k < outputs_.size(); ++k)
    results.push_back(stack_along(node_, scans[k], 0, positions, outputs_[carried_count + k]));
  return results;
}

std::vector<Tensor> ControlFlowRunner::run_scan(const std::vector<Tensor>& inputs) {
  if (control_flow::is_batched_scan(node_)) return run_batched_scan(inputs);
  const auto& attrs = node_.attributes;
  const size_t formal = control_flow::formal_inputs(node_);
  const auto scan_count = static_cast<size_t>(attrs.get_int("num_scan_inputs"));
  const size_t states = formal - scan_count;
  const std::vector<int64_t> in_axes = attrs.get_ints_or("scan_input_axes", {});
  const std::vector<int64_t> in_directions = attrs.get_ints_or("scan_input_directions", {});
  const std::vector<int64_t> out_axes = attrs.get_ints_or("scan_output_axes", {});
  const std::vector<int64_t> out_directions = attrs.get_ints_or("scan_output_directions", {});
  std::vector<size_t> axes;
  int64_t length = -1;
  for (size_t s = 0; s < scan_count; ++s) {
    const Tensor& x = inputs[states + s];
    axes.push_back(
        normalized(node_, in_axes.empty() ? 0 : in_axes[s], x.shape().rank(), "scan input axis"));
    const int64_t n = x.shape()[axes.back()];
    if (length >= 0 && n != length)
      fail(node_, "scan inputs have different lengths (" + std::to_string(length) + " and " +
                      std::to_string(n) + ")");
    length = n;
  }
  std::vector<Tensor> state(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(states));
  std::vector<std::vector<Tensor>> scans;
  for (int64_t t = 0; t < length; ++t) {
    std::vector<Tensor> formal_inputs = state;
    for (size_t s = 0; s < scan_count; ++s) {
      const bool reverse = s < in_directions.size() && in_directions[s] != 0;
      formal_inputs.push_back(
          slice_along(inputs[states + s], axes[s], reverse ? length - 1 - t : t));
    }
    std::vector<Tensor> out = run_body(bodies_[0], std::move(formal_inputs), inputs);
    if (out.size() < states)
      fail(node_, "the body returned " + std::to_string(out.size()) + " outputs");
    for (size_t i = 0; i < states; ++i) state[i] = std::move(out[i]);
    scans.resize(out.size() - states);
    for (size_t k = 0; k < scans.size(); ++k) scans[k].push_back(std::move(out[states + k]));
  }
  std::vector<Tensor> results = std::move(state);
  scans.resize(std::max(scans.size(), outputs_.size() - std::min(outputs_.size(), states)));
  for (size_t k = 0; k < scans.size() && states + k < outputs_.size(); ++k) {
    const bool reverse = k < out_directions.size() && out_directions[k] != 0;
    std::vector<int64_t> positions;
    for (int64_t t = 0; t < length; ++t) positions.push_back(reverse ? length - 1 - t : t);
    const size_t rank = outputs_[states + k].shape.rank();
    const size_t axis =
        normalized(node_, k < out_axes.size() ? out_axes[k] : 0, rank, "scan output axis");
    results.push_back(stack_along(node_, scans[k], axis, positions, outputs_[states + k]));
  }
  return results;
}

void ControlFlowRunner::scan_batch_entry(const std::vector<Tensor>& inputs, int64_t entry,
                                         int64_t steps_to_run, std::vector<Tensor>& state,
                                         std::vector<std::vector<Tensor>>& steps) {
  const size_t first_scan = 1 + state.size();
  const std::vector<int64_t> directions = node_.attributes.get_ints_or("directions", {});
  std::vector<Tensor> sequences;  // each scan input's entry, [length, ...]
  for (size_t i = first_scan; i < control_flow::formal_inputs(node_); ++i)
    sequences.push_back(slice_along(inputs[i], 0, entry));
  for (int64_t t = 0; t < steps_to_run; ++t) {
    std::vector<Tensor> formal_inputs = state;
    for (size_t s = 0; s < sequences.size(); ++s) {
      // A reversed scan input runs from the end of this entry's own sequence, not of the axis.
      const bool reverse = s < directions.size() && directions[s] != 0;
      formal_inputs.push_back(slice_along(sequences[s], 0, reverse ? steps_to_run - 1 - t : t));
    }
    std::vector<Tensor> out = run_body(bodies_[0], std::move(formal_inputs), inputs);
    if (out.size() < state.size())
      fail(node_, "the body returned " + std::to_string(out.size()) + " outputs");
    for (size_t i = 0; i < state.size(); ++i) state[i] = std::move(out[i]);
    steps.resize(out.size() - state.size());
    for (size_t k = 0; k < steps.size(); ++k) steps[k].push_back(std::move(out[state.size() + k]));
  }
}

// Opset 8: each batch entry b is a scan of its own, from entry b of the states, over entry b of
// the scan inputs along their axis 1, for sequence_lens[b] steps; the final states and the scan
// outputs (padded to the whole length) are stacked again along the batch axis.
std::vector<Tensor> ControlFlowRunner::run_batched_scan(const std::vector<Tensor>& inputs) {
  const size_t formal = control_flow::formal_inputs(node_);
  const auto scan_count = static_cast<size_t>(node_.attributes.get_int("num_scan_inputs"));
  const size_t states = formal - 1 - scan_count;
  int64_t batch = -1;
  int64_t length = -1;
  for (size_t i = 1 + states; i < formal; ++i) {
    const Shape& shape = inputs[i].shape();
    if (shape.rank() < 2 || (batch >= 0 && (shape[0] != batch || shape[1] != length)))
      fail(node_, "scan input " + std::to_string(i) + " has shape " + shape.to_string() +
                      ", expected [batch, sequence, ...] as the other scan inputs");
    batch = shape[0];
    length = shape[1];
  }
  for (size_t i = 1; i <= states; ++i)
    if (inputs[i].shape().rank() < 1 || inputs[i].shape()[0] != batch)
      fail(node_, "state input " + std::to_string(i) + " has shape " +
                      inputs[i].shape().to_string() + ", expected [" + std::to_string(batch) +
                      ", ...]");
  const std::vector<int64_t> lengths = sequence_lengths(node_, inputs[0], batch, length);

  const size_t scan_outputs = outputs_.size() - std::min(outputs_.size(), states);
  std::vector<std::vector<Tensor>> final_states(states);
  std::vector<std::vector<std::vector<Tensor>>> steps(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Tensor> state;
    for (size_t i = 1; i <= states; ++i) state.push_back(slice_along(inputs[i], 0, b));
    auto& entry_steps = steps[static_cast<size_t>(b)];
    scan_batch_entry(inputs, b, lengths[static_cast<size_t>(b)], state, entry_steps);
    entry_steps.resize(scan_outputs);
    for (size_t i = 0; i < states; ++i) final_states[i].push_back(std::move(state[i]));
  }

  std::vector<int64_t> entries(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) entries[static_cast<size_t>(b)] = b;
  std::vector<Tensor> results;
  for (size_t i = 0; i < states; ++i)
    results.push_back(stack_along(node_, final_states[i], 0, entries, outputs_[i]));
  for (size_t k = 0; k < scan_outputs; ++k)
    results.push_back(batched_scan_output(node_, steps, k, length, outputs_[states + k]));
  return results;
}

}  // namespace troupe::detail
