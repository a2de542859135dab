// Every op of the oneDNN backend against the reference kernel (the specification), on random shapes
// and attributes, in the spirit of llama.cpp's test-backend-ops. Each case builds both kernels
// through the registry from the same KernelRequest, runs them on the same random inputs and
// compares with a per-op tolerance. Cases marked "must accept" fail when the dnnl backend declines
// them, so the suite cannot pass by falling back to the reference everywhere.
//
// The seed is fixed (TROUPE_SEED overrides it); a failure message names the case with its shapes
// and attributes.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../test_util.hpp"
#include "engine/ops/op_schema.hpp"
#include "kernels/cpu_isa.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/packed_gemm_avx2.hpp"
#include "kernels/dnnl/winograd_avx2.hpp"
#include "kernels/kernel_registry.hpp"
#include "layout_test_util.hpp"

namespace troupe {
namespace {

using kernels::Kernel;
using kernels::KernelRegistry;
using kernels::KernelRequest;
using kernels::TensorLayout;
using ints = std::vector<int64_t>;
using test::to_layout;
using test::to_plain;

unsigned base_seed() {
  const char* env = std::getenv("TROUPE_SEED");
  return env ? static_cast<unsigned>(std::strtoul(env, nullptr, 10)) : 20240607u;
}

struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-5;
};

/// One op instance: node, input data (empty Tensor = omitted optional input) and which inputs are
/// handed to the kernels as model constants.
struct Case {
  Node node;
  std::vector<Tensor> inputs;
  std::vector<bool> constant;
  size_t num_outputs = 1;
  Tolerance tolerance;
  bool must_accept = true;
  /// KernelRequest::compute_precision: bf16 cases compare with the reference run on inputs
  /// rounded to bf16 (what the kernel computes on), see bf16_cases().
  ElementType precision = ElementType::f32;
  /// When set, the implementation the dnnl kernel must report (a path the case is written for).
  std::string implementation;
  /// When set, a part of the implementation's name the dnnl kernel must report ("wino").
  std::string implementation_part;
  /// Layouts the graph compiler assigned (empty or plain: dense row-major), as it hands them to
  /// kernels between convolutions: the dnnl kernel reads and writes those tensors in them.
  std::vector<TensorLayout> input_layouts;
  TensorLayout output_layout;
  /// output_layout is every output's (a Split's parts), not output 0's alone.
  bool every_output_laid_out = false;
  /// The dnnl kernel must not run oneDNN's own reference implementation (`dnnl:ref:any`), which
  /// oneDNN picks silently where its JIT kernels decline a layout.
  bool fast_implementation = false;
};

std::string layout_name(TensorLayout layout) {
  if (layout.channels_last) return "nhwc";
  return layout.channel_block ? "blocked" + std::to_string(layout.channel_block) : "plain";
}

std::string describe(const Case& c) {
  std::ostringstream s;
  s << c.node.op_type << " inputs";
  for (size_t i = 0; i < c.inputs.size(); ++i)
    s << " " << (c.inputs[i].empty() ? std::string("-") : c.inputs[i].shape().to_string())
      << (i < c.constant.size() && c.constant[i] ? "(const)" : "")
      << (i < c.input_layouts.size() && !c.input_layouts[i].is_plain()
              ? "(" + layout_name(c.input_layouts[i]) + ")"
              : "");
  if (!c.output_layout.is_plain()) s << " output(" << layout_name(c.output_layout) << ")";
  for (const auto& [name, value] : c.node.attributes.all()) {
    s << " " << name << "=";
    if (auto* i = std::get_if<int64_t>(&value)) s << *i;
    if (auto* f = std::get_if<double>(&value)) s << *f;
    if (auto* str = std::get_if<std::string>(&value)) s << *str;
    if (auto* v = std::get_if<std::vector<int64_t>>(&value)) {
      s << "[";
      for (size_t k = 0; k < v->size(); ++k) s << (k ? "," : "") << (*v)[k];
      s << "]";
    }
  }
  return s.str();
}

class Rng {
 public:
  explicit Rng(unsigned seed) : engine_(seed) {}
  int64_t integer(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(engine_);
  }
  double real(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(engine_);
  }
  bool chance(double p) { return real(0, 1) < p; }
  template <class T>
  const T& pick(const std::vector<T>& values) {
    return values[static_cast<size_t>(integer(0, static_cast<int64_t>(values.size()) - 1))];
  }
  ints dims(size_t rank, int64_t lo, int64_t hi) {
    ints d(rank);
    for (auto& x : d) x = integer(lo, hi);
    return d;
  }
  Tensor tensor(const ints& dims, double lo = -1.0, double hi = 1.0) {
    Tensor t(ElementType::f32, Shape(dims));
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.size(); ++i) p[i] = static_cast<float>(real(lo, hi));
    return t;
  }

 private:
  std::mt19937 engine_;
};

Node make_node(const std::string& op_type, Attributes attributes = {}, size_t num_outputs = 1) {
  Node node;
  node.op_type = op_type;
  node.name = op_type + "_under_test";
  node.attributes = std::move(attributes);
  node.inputs.assign(1, 0);
  node.outputs.assign(num_outputs, 0);
  return node;
}

std::vector<ValueInfo> value_infos(const std::vector<Tensor>& tensors, const char* prefix) {
  std::vector<ValueInfo> infos;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].empty())
      infos.push_back(ValueInfo{});
    else
      infos.push_back(
          ValueInfo{prefix + std::to_string(i), tensors[i].element_type(), tensors[i].shape()});
  }
  return infos;
}

std::vector<ValueInfo> infer_outputs(const Case& c, const std::vector<ValueInfo>& inputs,
                                     const std::vector<const Tensor*>& constants) {
  const OpSchema* schema = OpSchemaRegistry::instance().find(c.node.op_type);
  if (schema == nullptr) throw std::runtime_error("no schema for " + c.node.op_type);
  ShapeInferContext ctx{c.node, inputs, constants};
  std::vector<ValueInfo> outputs = schema->infer(ctx);
  outputs.resize(c.num_outputs);
  return outputs;
}

/// Largest violation of |got - want| <= atol + rtol*|want| as "index: got vs want", or "".
std::string compare(const Tensor& got, const Tensor& want, Tolerance tol) {
  if (got.shape() != want.shape())
    return "shape " + got.shape().to_string() + " vs " + want.shape().to_string();
  // Integer and boolean outputs (Where's) compare as their f32 values, exact for the cases' range.
  auto as_f32 = [](const Tensor& t) {
    if (t.element_type() == ElementType::f32) return t.to_vector<float>();
    std::vector<float> v(static_cast<size_t>(t.size()));
    for (int64_t i = 0; i < t.size(); ++i)
      v[static_cast<size_t>(i)] = static_cast<float>(t.value_at(i));
    return v;
  };
  const std::vector<float> g = as_f32(got);
  const std::vector<float> w = as_f32(want);
  double worst = 0;
  size_t worst_index = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) && std::isnan(g[i])) continue;
    if (std::isinf(w[i]) && g[i] == w[i]) continue;
    const double excess =
        std::fabs(double(g[i]) - double(w[i])) - (tol.atol + tol.rtol * std::fabs(double(w[i])));
    if (!(excess <= worst)) {  // also catches NaN
      worst = std::isnan(excess) ? INFINITY : excess;
      worst_index = i;
    }
  }
  if (worst == 0) return "";
  std::ostringstream s;
  s << "element " << worst_index << ": dnnl " << g[worst_index] << " vs reference "
    << w[worst_index];
  return s.str();
}

/// Counts per op, printed at the end of each test.
struct Tally {
  std::map<std::string, int> ran;
  std::map<std::string, int> declined;

  void print(const std::string& title) const {
    std::cout << "[ consistency ] " << title << ":";
    std::map<std::string, int> all = ran;
    for (const auto& [op, n] : declined) all[op] += 0;
    for (const auto& [op, n] : all) {
      std::cout << " " << op << "=" << (ran.count(op) ? ran.at(op) : 0);
      if (declined.count(op)) std::cout << "(+" << declined.at(op) << " to ref)";
    }
    std::cout << std::endl;
  }
};

/// The engine creates kernels on the compiling thread and runs them on execute threads: the
/// optimized kernel runs on a thread of its own, so one that keeps state bound to the thread that
/// created it (oneDNN's thread-local scratchpad of gemm convolutions) fails here.
void execute_on_another_thread(Kernel& kernel, const std::vector<Tensor>& inputs,
                               std::vector<Tensor>& outputs) {
  std::exception_ptr error;
  std::thread runner([&] {
    try {
      kernel.execute(inputs, outputs);
    } catch (...) {
      error = std::current_exception();
    }
  });
  runner.join();
  if (error) std::rethrow_exception(error);
}

/// Runs one case on both backends and compares; records it in `tally`.
void check_case(const Case& c, Tally& tally) {
  SCOPED_TRACE(describe(c));
  std::vector<const Tensor*> constants(c.inputs.size(), nullptr);
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (i < c.constant.size() && c.constant[i]) constants[i] = &c.inputs[i];
  const std::vector<ValueInfo> inputs = value_infos(c.inputs, "x");
  const std::vector<ValueInfo> outputs = infer_outputs(c, inputs, constants);
  KernelRequest request{c.node, inputs, outputs, constants};
  request.compute_precision = c.precision;
  request.input_layouts = c.input_layouts;
  if (!c.output_layout.is_plain())
    request.output_layouts.assign(c.every_output_laid_out ? outputs.size() : 1, c.output_layout);

  std::unique_ptr<Kernel> fast = KernelRegistry::instance().create_with("dnnl", request);
  if (!fast) {
    tally.declined[c.node.op_type]++;
    if (c.must_accept) ADD_FAILURE() << "the dnnl backend declined a case it should run";
    return;
  }
  // The reference kernel, the specification, reads and writes plain tensors only.
  KernelRequest plain_request = request;
  plain_request.input_layouts.clear();
  plain_request.output_layouts.clear();
  std::unique_ptr<Kernel> reference =
      KernelRegistry::instance().create_with("reference", plain_request);
  ASSERT_TRUE(reference) << "no reference kernel";
  EXPECT_EQ(fast->implementation().rfind("dnnl", 0), 0u) << fast->implementation();
  if (!c.implementation.empty()) {
    EXPECT_EQ(fast->implementation(), c.implementation);
  }
  if (!c.implementation_part.empty()) {
    EXPECT_NE(fast->implementation().find(c.implementation_part), std::string::npos)
        << fast->implementation();
  }
  if (c.fast_implementation) {
    // oneDNN's reference implementations: `ref:any`, `ref_int8:any`, `bnorm_ref:any`, ...
    const std::string& name = fast->implementation();
    EXPECT_FALSE(name.rfind("dnnl:ref", 0) == 0 || name.find("_ref:") != std::string::npos) << name;
  }
  // A product asked to compute in bf16 may compute in f32 where that was timed faster (f32
  // Winograd convolutions on AVX-512 without AMX) or where troupe's own loops replace a oneDNN
  // GEMM (depthwise convolutions); it says so, and is held to the f32 reference.
  const std::string& implementation = fast->implementation();
  const bool says_f32 = kernels::Kernel::computes_f32_instead_of_bf16(implementation);
  const bool computes_bf16 = c.precision == ElementType::bf16 && !says_f32;
  // Recurrent cells compute in f32 where oneDNN has no bf16 kernel for them (GRU; any cell on
  // a CPU without bf16 instructions).
  const bool recurrent =
      c.node.op_type == "LSTM" || c.node.op_type == "GRU" || c.node.op_type == "RNN";
  const bool depthwise_rows = implementation.rfind("dnnl:depthwise_rows", 0) == 0;
  if (c.precision == ElementType::bf16 && says_f32 && !recurrent && !depthwise_rows) {
    EXPECT_NE(implementation.find("wino"), std::string::npos) << implementation;
    EXPECT_TRUE(kernels::onednn::bf16_takes_f32_winograd()) << implementation;
  }
  if (computes_bf16) {
    EXPECT_NE(implementation.find("bf16"), std::string::npos)
        << implementation << " does not compute in bf16";
  }

  auto allocate = [&](float fill) {
    std::vector<Tensor> out;
    for (const ValueInfo& v : outputs) {
      if (v.type == ElementType::undefined) {
        out.emplace_back();
        continue;
      }
      Tensor t(v.type, v.shape);
      if (v.type == ElementType::f32)
        std::fill(t.data<float>(), t.data<float>() + t.size(), fill);
      else
        std::memset(t.raw_data(), std::isnan(fill) ? 0x7f : 0, t.byte_size());
      out.push_back(t);
    }
    return out;
  };
  std::vector<Tensor> want = allocate(0.f);
  if (computes_bf16) {
    // The specification of a bf16 kernel: the reference on src and weights rounded to bf16
    // (to nearest even, as oneDNN's reorders round), accumulated in f32. Bias, residual and
    // Gemm's C stay f32.
    std::vector<Tensor> rounded = c.inputs;
    for (size_t i = 0; i < 2 && i < rounded.size(); ++i)
      rounded[i] = rounded[i].convert(ElementType::bf16).convert(ElementType::f32);
    reference->execute(rounded, want);
  } else {
    reference->execute(c.inputs, want);
  }
  // The fast kernel reads its inputs in their assigned layouts and writes output 0 in its own.
  std::vector<Tensor> fast_inputs = c.inputs;
  for (size_t i = 0; i < c.input_layouts.size() && i < fast_inputs.size(); ++i)
    if (!fast_inputs[i].empty()) fast_inputs[i] = to_layout(fast_inputs[i], c.input_layouts[i]);
  auto run_fast = [&] {
    // Poisoned outputs reveal elements the fast kernel never writes.
    std::vector<Tensor> out = allocate(std::nanf(""));
    execute_on_another_thread(*fast, fast_inputs, out);
    for (size_t o = 0; o < out.size() && (o == 0 || c.every_output_laid_out); ++o)
      if (!out[o].empty()) out[o] = to_plain(out[o], c.output_layout);
    return out;
  };
  const std::vector<Tensor> got = run_fast();
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i].empty()) continue;
    const std::string diff = compare(got[i], want[i], c.tolerance);
    EXPECT_EQ(diff, "") << "output " << i << " (" << fast->implementation() << ")";
  }
  // A second run takes the prepared path (bound memory, packed constant weights).
  const std::vector<Tensor> again = run_fast();
  for (size_t i = 0; i < got.size(); ++i) {
    if (!got[i].empty()) {
      EXPECT_EQ(compare(again[i], got[i], Tolerance{0, 0}), "") << "second run differs";
    }
  }
  tally.ran[c.node.op_type]++;
}

// ---------------------------------------------------------------------------------------------
// Case generators, one per op family.

std::vector<Case> unary_cases(Rng& rng) {
  struct Op {
    const char* name;
    double lo, hi;
  };
  const std::vector<Op> ops = {
      {"Relu", -3, 3},  {"Sigmoid", -8, 8},    {"Tanh", -4, 4},        {"Exp", -5, 5},
      {"Sqrt", 0, 20},  {"Abs", -3, 3},        {"Neg", -3, 3},         {"LeakyRelu", -3, 3},
      {"Elu", -4, 4},   {"Softplus", -10, 10}, {"HardSwish", -5, 5},   {"Gelu", -5, 5},
      {"Clip", -3, 3},  {"Round", -4, 4},      {"Reciprocal", 0.1, 5}, {"HardSigmoid", -6, 6},
      {"Swish", -8, 8}, {"Pow", -3, 3},        {"Mish", -8, 8}};
  std::vector<Case> cases;
  for (const Op& op : ops) {
    for (int k = 0; k < 12; ++k) {
      Case c;
      // The first few above 16384 elements, where an op runs as oneDNN's primitive rather than
      // as troupe's loop (kernels/dnnl/eltwise.cpp), except Sigmoid, Swish and Exp, which the
      // loop then splits over the team (kernels/dnnl/eltwise_loop.hpp).
      const ints dims =
          k < 3 ? rng.dims(3, 28, 40) : rng.dims(static_cast<size_t>(rng.integer(0, 4)), 1, 17);
      Tensor x = rng.tensor(dims, op.lo, op.hi);
      std::string name = op.name;
      if (name == "Round") {  // many exact halves, where rounding to even matters
        float* p = x.data<float>();
        for (int64_t i = 0; i < x.size(); ++i) p[i] = std::round(p[i] * 2) / 2;
      }
      if (name == "Reciprocal" && rng.chance(0.5)) {
        float* p = x.data<float>();
        for (int64_t i = 0; i < x.size(); ++i) p[i] = -p[i];
      }
      Attributes attrs;
      if (name == "LeakyRelu" && rng.chance(0.7)) attrs.set("alpha", rng.real(0.01, 0.5));
      if (name == "Elu" && rng.chance(0.7)) attrs.set("alpha", rng.real(0.1, 2.0));
      if (name == "Gelu" && rng.chance(0.5)) attrs.set("approximate", std::string("tanh"));
      if (name == "Swish" && rng.chance(0.5)) attrs.set("alpha", rng.real(0.5, 2.0));
      if (name == "HardSigmoid" && rng.chance(0.7)) {  // PyTorch writes alpha 1/6
        attrs.set("alpha", rng.real(0.1, 0.5));
        attrs.set("beta", rng.real(0.2, 0.8));
      }
      c.inputs = {x};
      c.constant = {false};
      if (name == "Clip") {
        // Bounds as constant scalar inputs (opset 11+), either one omitted.
        const float lo = static_cast<float>(rng.real(-2, 0));
        const float hi = static_cast<float>(rng.real(0, 2));
        const int which = static_cast<int>(rng.integer(0, 2));
        c.inputs.push_back(which == 2 ? Tensor() : Tensor::from_vector<float>({}, {lo}));
        c.inputs.push_back(which == 1 ? Tensor() : Tensor::from_vector<float>({}, {hi}));
        c.constant = {false, true, true};
      }
      if (name == "Pow") {
        // A constant scalar exponent, f32 or i64, of rank 0 or 1; fractional ones on x >= 0.
        const double exponent = rng.pick<double>({2, 3, 4, -1, 1, 0.5, 1.5, -0.5, 2.5});
        if (exponent != std::floor(exponent)) {
          float* p = x.data<float>();
          for (int64_t i = 0; i < x.size(); ++i) p[i] = std::abs(p[i]) + 0.01f;
        }
        const Shape shape = rng.chance(0.5) ? Shape{} : Shape{1};
        c.inputs = {x, exponent == std::floor(exponent) && rng.chance(0.4)
                           ? Tensor::from_vector<int64_t>(shape, {static_cast<int64_t>(exponent)})
                           : Tensor::from_vector<float>(shape, {static_cast<float>(exponent)})};
        c.constant = {false, true};
      }
      c.node = make_node(name, attrs);
      // oneDNN's log is accurate in absolute terms (about 1e-6), so results near 0 (Log near 1,
      // Softplus of large negative x) need an absolute tolerance.
      c.tolerance = name == "Softplus" ? Tolerance{1e-5, 1e-5} : Tolerance{1e-5, 1e-6};
      cases.push_back(c);
    }
  }
  return cases;
}

std::vector<Case> binary_cases(Rng& rng) {
  std::vector<Case> cases;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    const bool commutative = std::string(op) != "Sub" && std::string(op) != "Div";
    for (int k = 0; k < 16; ++k) {
      // The first few above 16384 elements, where a plain op runs as oneDNN's primitive rather
      // than as rows (kernels/dnnl/binary.cpp).
      const size_t rank = k < 4 ? 4 : static_cast<size_t>(rng.integer(0, 5));
      const ints full = k < 4 ? rng.dims(rank, 12, 16) : rng.dims(rank, 1, 9);
      // The other operand: some dims set to 1, some leading dims dropped.
      ints small = full;
      for (auto& d : small)
        if (rng.chance(0.4)) d = 1;
      const size_t drop = static_cast<size_t>(rng.integer(0, static_cast<int64_t>(rank)));
      small.erase(small.begin(), small.begin() + static_cast<ptrdiff_t>(drop));
      const bool small_left = rng.chance(0.25);
      Case c;
      c.node = make_node(op);
      const bool positive = std::string(op) == "Div";
      Tensor a = rng.tensor(small_left ? small : full, positive ? 0.5 : -2, 2);
      Tensor b = rng.tensor(small_left ? full : small, positive ? 0.5 : -2, 2);
      c.inputs = {a, b};
      c.constant = {false, rng.chance(0.3)};
      // oneDNN broadcasts only its second source; a broadcast left side is fine when the op
      // commutes (the kernel swaps), else the reference kernel takes it.
      ints padded = small;
      padded.insert(padded.begin(), full.size() - small.size(), 1);
      c.must_accept = !small_left || commutative || padded == full;
      c.tolerance = {1e-6, 1e-7};
      cases.push_back(c);
    }
  }
  return cases;
}

std::vector<Case> softmax_cases(Rng& rng) {
  std::vector<Case> cases;
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (int k = 0; k < 16; ++k) {
      const int64_t rank = rng.integer(1, 4);
      const ints dims = rng.dims(static_cast<size_t>(rank), 1, 24);
      Case c;
      Attributes attrs;
      if (rng.chance(0.7)) attrs.set("axis", rng.integer(-rank, rank - 1));
      c.node = make_node(op, attrs);
      c.inputs = {rng.tensor(dims, -6, 6)};
      c.constant = {false};
      c.tolerance = {1e-5, 1e-5};
      cases.push_back(c);
    }
  }
  return cases;
}

// Softmax and LogSoftmax over `shapes` (dims, axis), run by `implementation`: values near 1e5
// where dims[0] is 4 (adding log(sum) to the maximum first was 2e-3 off there), masked (-inf)
// entries in the Softmax cases, never a whole row along the axis (its softmax is NaN either way;
// `last_axis`: the rows are the last axis, whose first element stays unmasked).
std::vector<Case> softmax_cases_on(Rng& rng, const std::vector<std::pair<ints, int64_t>>& shapes,
                                   const std::string& implementation, bool last_axis) {
  std::vector<Case> cases;
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (const auto& [dims, axis] : shapes) {
      Case c;
      Attributes attrs;
      attrs.set("axis", axis);
      c.node = make_node(op, attrs);
      const bool large = dims[0] == 4;
      Tensor x = large ? rng.tensor(dims, 1e5 - 10, 1e5 + 10) : rng.tensor(dims, -8, 8);
      if (std::string(op) == "Softmax" && (!last_axis || dims.back() > 1)) {
        float* p = x.data<float>();
        for (int64_t i = 1; i < x.size(); i += 7)
          if (!last_axis || i % dims.back() != 0) p[i] = -std::numeric_limits<float>::infinity();
      }
      c.inputs = {x};
      c.constant = {false};
      c.tolerance = {1e-5, 1e-5};
      c.implementation = implementation;
      cases.push_back(c);
    }
  }
  return cases;
}

// Along an axis that is not the innermost, where oneDNN 2.6 has only its reference
// implementation: troupe's strided loop, with blocks of columns cut short at the end of a row,
// the outer slices spread over threads, masked (-inf) entries, and inputs near 1e5 (where
// LogSoftmax must subtract the maximum before the log of the sum).
std::vector<Case> strided_softmax_cases(Rng& rng) {
  return softmax_cases_on(rng,
                          {{{1, 16, 4, 8400}, 1},
                           {{2, 16, 3, 200}, 1},
                           {{3, 1000, 70}, 1},
                           {{1, 7, 1, 65}, 1},
                           {{5, 2, 64}, 1},
                           {{4, 9, 130}, 0},
                           {{2, 3, 33, 5}, 2},
                           {{6, 40, 1, 1, 3}, -4}},
                          "dnnl:strided_softmax", false);
}

// The last axis of at most 32 elements, at least 16 rows (attention over few tokens: AutoInt's
// fields, TNT's pixels): whole blocks of 64 rows and a partial one, one element.
std::vector<Case> short_rows_softmax_cases(Rng& rng) {
  return softmax_cases_on(rng,
                          {{{2, 256, 20, 20}, -1},
                           {{100, 4, 16, 16}, 3},
                           {{70, 32}, 1},
                           {{16, 1}, -1},
                           {{3, 47, 5}, 2},
                           {{4, 9, 13}, -1},
                           {{129, 31}, -1}},
                          "dnnl:short_rows_softmax", true);
}

std::vector<Case> matmul_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 40; ++k) {
    const int64_t m = rng.integer(1, 40), n = rng.integer(1, 40), kk = rng.integer(1, 70);
    ints a{m, kk}, b{kk, n};
    const int shape_kind = static_cast<int>(rng.integer(0, 5));
    if (shape_kind == 1) {  // same batch on both sides
      const ints batch = rng.dims(static_cast<size_t>(rng.integer(1, 2)), 1, 4);
      a.insert(a.begin(), batch.begin(), batch.end());
      b.insert(b.begin(), batch.begin(), batch.end());
    } else if (shape_kind == 2) {  // batch on the left, shared right-hand side
      const ints batch = rng.dims(static_cast<size_t>(rng.integer(1, 2)), 1, 4);
      a.insert(a.begin(), batch.begin(), batch.end());
    } else if (shape_kind == 3) {  // broadcast batch dims with 1s on either side
      const int64_t b0 = rng.integer(2, 3), b1 = rng.integer(2, 3);
      a.insert(a.begin(), {b0, 1});
      b.insert(b.begin(), {1, b1});
    } else if (shape_kind == 4) {  // 1-D operands
      if (rng.chance(0.5))
        a = {kk};
      else
        b = {kk};
    }
    Case c;
    c.node = make_node("MatMul");
    c.inputs = {rng.tensor(a), rng.tensor(b)};
    c.constant = {false, rng.chance(0.5)};
    c.tolerance = {1e-4, 2e-6 * static_cast<double>(kk)};
    cases.push_back(c);
  }
  // Gemm: transposes, alpha/beta and every shape of C.
  for (int k = 0; k < 40; ++k) {
    const int64_t m = rng.integer(1, 40), n = rng.integer(1, 40), kk = rng.integer(1, 70);
    Attributes attrs;
    const bool ta = rng.chance(0.4), tb = rng.chance(0.5);
    if (ta || rng.chance(0.2)) attrs.set("transA", int64_t{ta});
    if (tb || rng.chance(0.2)) attrs.set("transB", int64_t{tb});
    if (rng.chance(0.4)) attrs.set("alpha", rng.real(-2, 2));
    if (rng.chance(0.4)) attrs.set("beta", rng.pick<double>({0.0, 0.5, 2.0, -1.0}));
    const std::vector<ints> c_shapes = {{}, {n}, {1, n}, {m, n}, {m, 1}, {1, 1}, {1}};
    Case c;
    c.node = make_node("Gemm", attrs);
    c.inputs = {rng.tensor(ta ? ints{kk, m} : ints{m, kk}),
                rng.tensor(tb ? ints{n, kk} : ints{kk, n})};
    c.constant = {false, rng.chance(0.6), true};
    if (rng.chance(0.15))
      c.inputs.push_back(Tensor());
    else
      c.inputs.push_back(rng.tensor(rng.pick(c_shapes)));
    c.tolerance = {1e-4, 4e-6 * static_cast<double>(kk)};
    cases.push_back(c);
  }
  // Constant wide weights (N > K) with many rows, which the kernel stores transposed for oneDNN's
  // GEMM-based implementation: 2-D, batched A, and Gemm with and without transB.
  const std::vector<std::pair<ints, ints>> wide = {
      {{64, 24}, {24, 96}}, {{2, 40, 16}, {16, 48}}, {{3, 33, 8}, {3, 8, 40}}};
  for (const auto& [a, b] : wide) {
    Case c;
    c.node = make_node("MatMul");
    c.inputs = {rng.tensor(a), rng.tensor(b)};
    c.constant = {false, true};
    c.tolerance = {1e-4, 2e-6 * static_cast<double>(a.back())};
    cases.push_back(c);
  }
  for (bool tb : {false, true}) {
    Case c;
    c.node = make_node("Gemm", Attributes{{"transB", int64_t{tb}}});
    c.inputs = {rng.tensor({40, 20}), rng.tensor(tb ? ints{50, 20} : ints{20, 50}),
                rng.tensor({50})};
    c.constant = {false, true, true};
    c.tolerance = {1e-4, 4e-6 * 20};
    cases.push_back(c);
  }
  return cases;
}

std::vector<Case> conv_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 60; ++k) {
    // Mostly 2-D; some 1-D and 3-D.
    const size_t spatial = k % 6 == 4 ? 1 : k % 6 == 5 ? 3 : 2;
    const int group_kind = static_cast<int>(rng.integer(0, 3));
    const int64_t group = group_kind == 0 ? 1 : group_kind == 1 ? rng.integer(2, 3) : 0;
    const int64_t in_per_group = group == 0 ? 1 : rng.integer(1, 8);
    const int64_t depth = group == 0 ? rng.integer(2, 16) : 0;  // depthwise channels
    const int64_t g = group == 0 ? depth : group;
    const int64_t out_per_group = group == 0 ? rng.integer(1, 2) : rng.integer(1, 8);
    const int64_t batch = rng.integer(1, 2);
    ints kernel(spatial), strides(spatial), dilations(spatial), pads(2 * spatial),
        x{batch, g * in_per_group};
    for (size_t i = 0; i < spatial; ++i) {
      kernel[i] = rng.integer(1, spatial == 3 ? 3 : 5);
      strides[i] = rng.integer(1, 2);
      dilations[i] = rng.chance(0.3) ? 2 : 1;
      pads[i] = rng.integer(0, kernel[i] - 1);
      pads[i + spatial] = rng.integer(0, kernel[i] - 1);  // asymmetric
      const int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
      x.push_back(rng.integer(std::max<int64_t>(extent, 3), spatial == 3 ? 8 : 14));
    }
    ints w{g * out_per_group, in_per_group};
    w.insert(w.end(), kernel.begin(), kernel.end());
    Attributes attrs;
    if (g > 1) attrs.set("group", g);
    if (rng.chance(0.7)) attrs.set("kernel_shape", kernel);
    attrs.set("strides", strides);
    attrs.set("dilations", dilations);
    const int pad_kind = static_cast<int>(rng.integer(0, 4));
    if (pad_kind <= 1)
      attrs.set("pads", pads);
    else if (pad_kind == 2)
      attrs.set("auto_pad", rng.pick<std::string>({"SAME_UPPER", "SAME_LOWER"}));
    else if (pad_kind == 3)
      attrs.set("auto_pad", std::string("VALID"));
    Case c;
    c.node = make_node("Conv", attrs);
    c.inputs = {rng.tensor(x), rng.tensor(w)};
    if (rng.chance(0.6)) c.inputs.push_back(rng.tensor({g * out_per_group}));
    c.constant = {false, rng.chance(0.7), true};
    int64_t reduction = in_per_group;
    for (int64_t d : kernel) reduction *= d;
    c.tolerance = {1e-4, 2e-6 * static_cast<double>(reduction)};
    cases.push_back(c);
  }
  return cases;
}

// The channel block of the blocked activation layout on this ISA: oneDNN's nChw8c on AVX2,
// nChw16c on AVX-512.
int native_block() {
  return test::cpu_has_avx512() ? 16 : 8;
}

// The layouts the graph compiler may keep a 4-D activation in on this ISA (plain, channel-blocked,
// channels-last; TROUPE_ACTIVATION_LAYOUT forces either of the last two).
std::vector<TensorLayout> activation_layouts() {
  return {TensorLayout{}, TensorLayout::blocked(native_block()),
          TensorLayout::channels_last_order()};
}

// Gives a Conv case a fused residual sum: a random residual of the convolution's output shape
// (inferred without the fused attributes), in `layout` like input 0.
void add_fused_sum(Case& c, TensorLayout layout, Rng& rng) {
  std::vector<const Tensor*> none(c.inputs.size(), nullptr);
  Case plain = c;
  plain.node.attributes = Attributes{};
  for (const auto& [name, value] : c.node.attributes.all())
    if (name.rfind("fused_", 0) != 0) plain.node.attributes.set(name, value);
  const ValueInfo out = infer_outputs(plain, value_infos(c.inputs, "x"), none)[0];
  c.inputs.push_back(rng.tensor(out.shape.dims()));
  c.constant.push_back(false);
  c.input_layouts = {layout, {}, {}, layout};
  c.node.attributes.set("fused_sum", int64_t{1});
}

// Conv over the shapes real models have, as the graph compiler hands it over: 1-D to 3-D (1-D, 2-D
// also in each activation layout of this ISA), dilations up to 4 (temporal convolution networks;
// oneDNN runs those with gemm on AVX2), dense, grouped and depthwise, strides 1-3, symmetric and
// asymmetric padding, with and without bias, batch 1 to 3, each with no post-op, an activation, a
// residual sum, or the sum then the activation (the fused contract's order).
std::vector<Case> conv_sweep_cases(Rng& rng) {
  const std::vector<TensorLayout> layouts = activation_layouts();
  const std::vector<std::string> activations = {
      "Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSwish", "Gelu", "Swish", "Mish"};
  std::vector<Case> cases;
  for (int k = 0; k < 120; ++k) {
    const size_t spatial = k % 8 == 6 ? 1 : k % 8 == 7 ? 3 : 2;
    const TensorLayout layout = spatial <= 2 ? layouts[(k / 2) % layouts.size()] : TensorLayout{};
    // Blocked layouts hold only channel counts the block divides.
    const int64_t unit = layout.channel_block ? layout.channel_block : rng.pick(ints{1, 3, 4});
    const int kind = k % 4;  // dense, grouped, depthwise, a wide dense one
    int64_t group = 1, channels = 0, out_channels = 0;
    if (kind == 0) {
      channels = unit * rng.integer(1, 3);
      out_channels = unit * rng.integer(1, 3);
    } else if (kind == 1) {
      group = rng.pick(ints{2, 4});
      channels = group * unit * rng.integer(1, 2);
      out_channels = group * unit * rng.integer(1, 2);
    } else if (kind == 2) {
      channels = unit * rng.integer(1, 3);
      group = channels;
      out_channels = channels * rng.integer(1, 2);
    } else {
      channels = out_channels = unit * 4;
    }
    const int64_t batch = rng.integer(1, 3);
    ints kernel(spatial), strides(spatial), dilations(spatial), pads(2 * spatial);
    ints x{batch, channels};
    for (size_t i = 0; i < spatial; ++i) {
      kernel[i] = rng.integer(1, spatial == 3 ? 3 : 5);
      strides[i] = rng.chance(0.7) ? 1 : rng.integer(2, 3);
      dilations[i] = kernel[i] > 1 && rng.chance(0.4) ? rng.integer(2, 4) : 1;
      const int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
      pads[i] = rng.integer(0, extent - 1);
      pads[i + spatial] = rng.chance(0.5) ? pads[i] : rng.integer(0, extent - 1);
      const int64_t lo = std::max<int64_t>(extent, 3);
      x.push_back(rng.integer(lo, lo + (spatial == 3 ? 5 : spatial == 1 ? 40 : 12)));
    }
    ints w{out_channels, channels / group};
    w.insert(w.end(), kernel.begin(), kernel.end());
    Attributes attrs;
    if (group > 1) attrs.set("group", group);
    attrs.set("kernel_shape", kernel);
    attrs.set("strides", strides);
    attrs.set("dilations", dilations);
    attrs.set("pads", pads);
    const int post = (k / 3) % 4;  // none, activation, sum, sum then activation
    if (post == 1 || post == 3) {
      const std::string act = rng.pick(activations);
      attrs.set("fused_activation", act);
      if (act == "Clip") {
        attrs.set("fused_activation_alpha", 0.0);
        attrs.set("fused_activation_beta", 6.0);
      }
    }
    Case c;
    c.node = make_node("Conv", attrs);
    c.inputs = {rng.tensor(x), rng.tensor(w),
                rng.chance(0.7) ? rng.tensor({out_channels}) : Tensor()};
    c.constant = {false, true, true};
    c.input_layouts = {layout};
    c.output_layout = layout;
    if (post >= 2) add_fused_sum(c, layout, rng);
    int64_t reduction = channels / group;
    for (int64_t d : kernel) reduction *= d;
    c.tolerance = {1e-4, 2e-6 * static_cast<double>(reduction)};
    c.fast_implementation = true;
    // Below AVX2 (ONEDNN_MAX_CPU_ISA=sse41) oneDNN's depthwise kernel crashes on channels-last
    // tensors with a residual sum: the kernel declines those and the reference runs them.
    if (kind == 2 && post >= 2 && layout.channels_last && !kernels::effective_cpu_isa().avx2)
      c.must_accept = false;
    cases.push_back(c);
  }
  return cases;
}

// Depthwise convolutions oneDNN has only its im2col GEMM or its reference kernel for, which
// troupe's own loops compute (kernels/dnnl/depthwise_rows.hpp): 1-D ones with 9 to 87 taps
// (QuartzNet's) plain and in the ISA's blocked layout, 3-D ones (X3D's 3x3x3 and 5x1x1, and
// 3x5x5) plain, blocked and channels-last (channel counts 16 does not divide too: the loops'
// last group of channels then overlaps the one before), strides 1 and 2, dilations, symmetric
// and asymmetric padding, with and without bias, no post-op, ReLU, an activation applied after
// the loops, a residual sum (then ReLU), and weights given at run time.
std::vector<Case> depthwise_rows_cases(Rng& rng) {
  const std::vector<std::string> activations = {"", "Relu", "Swish", "HardSwish"};
  const std::vector<ints> kernels_3d = {{3, 3, 3}, {5, 1, 1}, {3, 5, 5}};
  std::vector<Case> cases;
  for (int k = 0; k < 24; ++k) {
    const bool three_d = k % 3 == 2;
    const int64_t j = k / 3;
    const TensorLayout layouts_3d[] = {TensorLayout{}, TensorLayout::channels_last_order(),
                                       TensorLayout::blocked(native_block())};
    const TensorLayout layout = three_d      ? layouts_3d[(j + j / 3) % 3]
                                : k % 2 == 1 ? TensorLayout::blocked(native_block())
                                             : TensorLayout{};
    const bool sum = k % 5 == 4;
    // Channels-last: 8 channels at least (a vector); a residual sum only where 16 divides them.
    const int64_t channels = layout.channel_block    ? layout.channel_block * rng.integer(1, 3)
                             : !layout.channels_last ? rng.integer(2, 40)
                             : sum                   ? 16 * rng.integer(1, 3)
                                                     : rng.integer(8, 60);
    const int64_t batch = rng.integer(1, 2);
    const ints kernel =
        three_d ? kernels_3d[static_cast<size_t>(k / 3) % 3] : ints{rng.integer(9, 87)};
    const size_t spatial = kernel.size();
    ints strides(spatial), dilations(spatial), pads(2 * spatial), x{batch, channels};
    for (size_t i = 0; i < spatial; ++i) {
      strides[i] = (!three_d || i > 0) && rng.chance(0.4) ? 2 : 1;
      dilations[i] = kernel[i] > 1 && rng.chance(0.25) ? 2 : 1;
      const int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
      pads[i] = rng.chance(0.7) ? extent / 2 : rng.integer(0, extent - 1);
      pads[i + spatial] = rng.chance(0.7) ? pads[i] : rng.integer(0, extent - 1);
      x.push_back(three_d ? rng.integer(std::max<int64_t>(extent, 3), extent + 12)
                          : rng.integer(extent, extent + 120));
    }
    ints w{channels, 1};
    w.insert(w.end(), kernel.begin(), kernel.end());
    Attributes attrs;
    attrs.set("group", channels);
    attrs.set("kernel_shape", kernel);
    attrs.set("strides", strides);
    attrs.set("dilations", dilations);
    attrs.set("pads", pads);
    const std::string& activation = activations[static_cast<size_t>(k / 2) % activations.size()];
    if (!activation.empty()) attrs.set("fused_activation", sum ? "Relu" : activation);
    Case c;
    c.node = make_node("Conv", attrs);
    c.inputs = {rng.tensor(x), rng.tensor(w), k % 4 == 1 ? Tensor() : rng.tensor({channels})};
    c.constant = {false, k % 7 != 3, true};
    c.input_layouts = {layout};
    c.output_layout = layout;
    if (sum) add_fused_sum(c, layout, rng);
    int64_t taps = 1;
    for (int64_t d : kernel) taps *= d;
    c.tolerance = {1e-4, 2e-6 * static_cast<double>(taps)};
    c.implementation = "dnnl:depthwise_rows";
    cases.push_back(c);
  }
  // A temporal 5x1x1 convolution over rows of whole vectors (32 wide): its taps read the input
  // rows in place rather than a padded copy.
  Case temporal;
  Attributes attrs;
  attrs.set("group", int64_t{6});
  attrs.set("kernel_shape", ints{5, 1, 1});
  attrs.set("pads", ints{2, 0, 0, 2, 0, 0});
  attrs.set("fused_activation", std::string("Relu"));
  temporal.node = make_node("Conv", attrs);
  temporal.inputs = {rng.tensor({2, 6, 7, 3, 32}), rng.tensor({6, 1, 5, 1, 1}), rng.tensor({6})};
  temporal.constant = {false, true, true};
  temporal.tolerance = {1e-4, 1e-5};
  temporal.implementation = "dnnl:depthwise_rows";
  cases.push_back(temporal);
  // RepLKNet's 31x31 kernels in the ISA's blocked layout, strides 1 and 2: rows long enough for
  // the loops' groups of neighbouring positions, and the positions near the borders beside them.
  for (const int64_t stride : {1, 2}) {
    Case large;
    Attributes a;
    a.set("group", int64_t{16});
    a.set("kernel_shape", ints{31, 31});
    a.set("strides", ints{stride, stride});
    a.set("pads", ints{15, 15, 15, 15});
    a.set("fused_activation", std::string("Relu"));
    large.node = make_node("Conv", a);
    large.inputs = {rng.tensor({1, 16, 9, 45}), rng.tensor({16, 1, 31, 31}), rng.tensor({16})};
    large.constant = {false, true, true};
    large.input_layouts = {TensorLayout::blocked(native_block())};
    large.output_layout = TensorLayout::blocked(native_block());
    large.tolerance = {1e-4, 2e-6 * 961};
    large.implementation = "dnnl:depthwise_rows";
    cases.push_back(large);
  }
  return cases;
}

// MaxPool with its Indices output (1-D to 3-D windows, strides, dilations, padding, ceil_mode,
// both storage orders, ties from rounded inputs) and MaxUnpool reading indices inside each
// window (ENet's and SegNet's decoders), with and without an output_shape: equal to the unpooled
// shape (troupe's loops), larger (the reference kernel's), and indices that leave their plane
// (the reference kernel's too). Each against the reference kernels.
std::vector<Case> max_pool_indices_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 30; ++k) {
    const size_t spatial = k % 5 == 3 ? 1 : k % 5 == 4 ? 3 : 2;
    ints kernel(spatial), strides(spatial), dilations(spatial, 1), pads(2 * spatial);
    ints x{rng.integer(1, 2), rng.integer(1, 24)};
    for (size_t i = 0; i < spatial; ++i) {
      kernel[i] = rng.integer(1, 3);
      strides[i] = rng.integer(1, 3);
      if (rng.chance(0.2)) dilations[i] = 2;
      pads[i] = rng.integer(0, kernel[i] - 1);
      pads[i + spatial] = rng.integer(0, kernel[i] - 1);
      x.push_back(rng.integer((kernel[i] - 1) * dilations[i] + 2, spatial == 3 ? 7 : 40));
    }
    Attributes attrs;
    attrs.set("kernel_shape", kernel);
    attrs.set("strides", strides);
    attrs.set("pads", pads);
    if (dilations != ints(spatial, 1)) attrs.set("dilations", dilations);
    if (rng.chance(0.3)) attrs.set("ceil_mode", int64_t{1});
    if (k % 4 == 1) attrs.set("storage_order", int64_t{1});
    Case c;
    c.node = make_node("MaxPool", attrs, 2);
    c.inputs = {rng.tensor(x, -3, 3)};
    if (k % 3 == 0) {  // many ties
      float* v = c.inputs[0].data<float>();
      for (int64_t i = 0; i < c.inputs[0].size(); ++i) v[i] = std::round(v[i]);
    }
    c.constant = {false};
    c.num_outputs = 2;
    c.tolerance = {0, 0};
    c.implementation = "dnnl:max_pool_indices";
    cases.push_back(c);
    // Dilated, without Indices: the same loops (oneDNN pools dilated windows on its reference
    // kernel).
    if (dilations != ints(spatial, 1)) {
      Case y_only = c;
      y_only.node = make_node("MaxPool", attrs, 1);
      y_only.num_outputs = 1;
      y_only.implementation = "dnnl:max_pool_dilated";
      cases.push_back(y_only);
    }
  }
  // One-element windows at stride 1 (PyTorch's export of indices into another pool's output),
  // in both storage orders.
  for (int64_t order : {0, 1}) {
    Case c;
    c.node =
        make_node("MaxPool", Attributes{{"kernel_shape", ints{1, 1}}, {"storage_order", order}}, 2);
    c.inputs = {rng.tensor({2, 5, 9, 13})};
    c.constant = {false};
    c.num_outputs = 2;
    c.tolerance = {0, 0};
    c.implementation = "dnnl:max_pool_indices";
    cases.push_back(c);
  }
  for (int k = 0; k < 16; ++k) {
    const size_t spatial = k % 4 == 3 ? 1 : 2;
    const int64_t batch = rng.integer(1, 2), channels = rng.integer(1, 12);
    ints kernel(spatial, 2), strides(spatial, 2), x{batch, channels}, unpooled{batch, channels};
    if (k % 5 == 2) kernel.assign(spatial, 3);
    for (size_t i = 0; i < spatial; ++i) {
      x.push_back(rng.integer(1, 20));
      unpooled.push_back((x.back() - 1) * strides[i] + kernel[i]);
    }
    Tensor indices(ElementType::i64, Shape(x));
    int64_t* index = indices.data<int64_t>();
    const int64_t planes = batch * channels;
    int64_t out_plane = 1, in_plane = 1;
    for (size_t i = 0; i < spatial; ++i) {
      out_plane *= unpooled[2 + i];
      in_plane *= x[2 + i];
    }
    const bool leaves_plane = k % 7 == 6;
    for (int64_t p = 0; p < planes; ++p) {
      for (int64_t e = 0; e < in_plane; ++e) {
        // A position inside the window of input element e.
        int64_t rest = e, offset = 0, stride = 1;
        for (size_t i = spatial; i-- > 0;) {
          const int64_t o = rest % x[2 + i];
          rest /= x[2 + i];
          offset += (o * strides[i] + rng.integer(0, kernel[i] - 1)) * stride;
          stride *= unpooled[2 + i];
        }
        const int64_t plane = leaves_plane ? (p + 1) % planes : p;
        index[p * in_plane + e] = plane * out_plane + offset;
      }
    }
    Attributes attrs;
    attrs.set("kernel_shape", kernel);
    attrs.set("strides", strides);
    Case c;
    c.node = make_node("MaxUnpool", attrs);
    c.inputs = {rng.tensor(x), indices};
    c.constant = {false, false};
    const int output_shape = k % 3;  // none, the unpooled shape, larger
    if (output_shape > 0) {
      ints shape = unpooled;
      if (output_shape == 2)
        for (size_t i = 0; i < spatial; ++i) shape[2 + i] += rng.integer(1, 3);
      c.inputs.push_back(
          Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(shape.size())}, shape));
      c.constant.push_back(true);
    }
    c.tolerance = {0, 0};
    c.implementation = "dnnl:max_unpool";
    cases.push_back(c);
  }
  return cases;
}

// 3x3 stride-1 convolutions with whole channel blocks and constant weights, in the ISA's blocked
// activations or plain ones, with a ReLU, a residual sum or both fused, a Sigmoid, a SiLU
// (Swish), or a sum then a HardSwish. On AVX-512 oneDNN's Winograd kernels compute them all (4x3
// or 2x3 tiles, its choice; nChw16c, plain ones reordered): they take ReLU and the sum as
// post-ops, and oneDNN's eltwise applies the other activations to their output after them. On
// AVX2 troupe's F(4x4, 3x3) computes those with at least Avx2Winograd::min_tiles output tiles,
// with the same eltwise after it, nChw8c or plain (reordered), with
// channels 8 to 48, so that panels of 8 and 16 output channels both run. Spatial sizes that tiles
// of 2 and 4 do not divide, padding 0, 1 and asymmetric, batches of 1 to 3.
std::vector<Case> winograd_cases(Rng& rng) {
  std::vector<Case> cases;
  const bool avx512 = test::cpu_has_avx512();
  const bool avx2 = kernels::effective_cpu_isa().avx2;
  const int64_t block = avx512 ? 16 : 8;
  for (int k = 0; k < 56; ++k) {
    const bool blocked = (avx512 || avx2) && k % 2 == 1;
    const TensorLayout layout = blocked ? TensorLayout::blocked(block) : TensorLayout{};
    const int64_t channels = block * rng.integer(1, avx512 ? 3 : 6);
    const int64_t out_channels = block * rng.integer(1, avx512 ? 3 : 6);
    const ints x{rng.integer(1, 3), channels, rng.integer(1, 30), rng.integer(1, 30)};
    const ints pads = k % 3 == 0   ? ints{0, 0, 0, 0}
                      : k % 3 == 1 ? ints{1, 1, 1, 1}
                                   : ints{1, 0, 0, 1};
    if (x[2] + pads[0] + pads[2] < 3 || x[3] + pads[1] + pads[3] < 3) {
      --k;  // no output
      continue;
    }
    Attributes attrs;
    attrs.set("kernel_shape", ints{3, 3});
    attrs.set("pads", pads);
    // none, Relu, sum, sum then Relu, Sigmoid, Swish (SiLU), sum then HardSwish
    const int post = (k / 2) % 7;
    const bool sum = post == 2 || post == 3 || post == 6;
    if (post == 1 || post == 3) attrs.set("fused_activation", std::string("Relu"));
    if (post == 4) attrs.set("fused_activation", std::string("Sigmoid"));
    if (post == 5) attrs.set("fused_activation", std::string("Swish"));
    if (post == 6) attrs.set("fused_activation", std::string("HardSwish"));
    Case c;
    c.node = make_node("Conv", attrs);
    c.inputs = {rng.tensor(x), rng.tensor({out_channels, channels, 3, 3}),
                rng.chance(0.7) ? rng.tensor({out_channels}) : Tensor()};
    c.constant = {false, true, true};
    c.input_layouts = {layout};
    c.output_layout = layout;
    if (sum) {
      const ints out{x[0], out_channels, x[2] + pads[0] + pads[2] - 2,
                     x[3] + pads[1] + pads[3] - 2};
      c.inputs.push_back(rng.tensor(out));
      c.constant.push_back(false);
      c.input_layouts = {layout, {}, {}, layout};
      c.node.attributes.set("fused_sum", int64_t{1});
    }
    c.tolerance = {1e-4, 2e-6 * static_cast<double>(channels * 9)};
    c.fast_implementation = true;
    if (avx512) c.implementation_part = "wino";
    const int64_t out_h = x[2] + pads[0] + pads[2] - 2, out_w = x[3] + pads[1] + pads[3] - 2;
    const int64_t tiles = x[0] * ((out_h + 3) / 4) * ((out_w + 3) / 4);
    if (!avx512 && avx2 && tiles >= kernels::onednn::Avx2Winograd::min_tiles)
      c.implementation_part = "winograd_4x3:avx2";
    cases.push_back(c);
  }
  return cases;
}

// ConvTranspose as real decoders have it (U-Net upsampling: kernel 2 stride 2; GAN and
// segmentation heads: kernel 3-4 stride 2 with padding and output_padding), 1-D to 3-D, 2-D also
// in each activation layout of this ISA: dense, grouped and depthwise, strides 1-3, dilations,
// symmetric and asymmetric pads, output_padding, output_shape, auto_pad SAME_UPPER/SAME_LOWER,
// with and without bias, batch 1 to 3, constant weights and (some) weights given at run time.
std::vector<Case> conv_transpose_cases(Rng& rng) {
  const std::vector<TensorLayout> layouts = activation_layouts();
  std::vector<Case> cases;
  for (int k = 0; k < 72; ++k) {
    const size_t spatial = k % 8 == 6 ? 1 : k % 8 == 7 ? 3 : 2;
    const TensorLayout layout = spatial <= 2 ? layouts[(k / 2) % layouts.size()] : TensorLayout{};
    const int64_t unit = layout.channel_block ? layout.channel_block : rng.pick(ints{1, 3, 4});
    const int kind = k % 3;  // dense, grouped, depthwise
    int64_t group = 1, channels = 0, out_per_group = 0;
    if (kind == 0) {
      channels = unit * rng.integer(1, 3);
      out_per_group = unit * rng.integer(1, 3);
    } else if (kind == 1) {
      group = rng.pick(ints{2, 4});
      channels = group * unit * rng.integer(1, 2);
      out_per_group = unit * rng.integer(1, 2);
    } else {
      channels = unit * rng.integer(1, 3);
      group = channels;
      out_per_group = 1;
    }
    const int64_t batch = rng.integer(1, 3);
    ints kernel(spatial), strides(spatial), dilations(spatial), pads(2 * spatial),
        output_padding(spatial), x{batch, channels};
    for (size_t i = 0; i < spatial; ++i) {
      kernel[i] = k % 4 == 0 ? 2 : rng.integer(1, spatial == 3 ? 3 : 5);
      strides[i] = k % 4 == 0 ? 2 : rng.integer(1, 3);
      dilations[i] = kernel[i] > 1 && rng.chance(0.2) ? 2 : 1;
      const int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
      // Pads that leave at least one output per input step (the output is never empty).
      pads[i] = rng.integer(0, (extent - 1) / 2);
      pads[i + spatial] = rng.chance(0.5) ? pads[i] : rng.integer(0, extent - 1 - pads[i]);
      output_padding[i] = rng.chance(0.3) ? rng.integer(0, strides[i] - 1) : 0;
      x.push_back(rng.integer(2, spatial == 3 ? 5 : spatial == 1 ? 30 : 12));
    }
    ints w{channels, out_per_group};
    w.insert(w.end(), kernel.begin(), kernel.end());
    Attributes attrs;
    if (group > 1) attrs.set("group", group);
    if (rng.chance(0.7)) attrs.set("kernel_shape", kernel);
    attrs.set("strides", strides);
    attrs.set("dilations", dilations);
    const int pad_kind = k % 5;  // pads, pads + output_padding, output_shape, SAME_*, none
    if (pad_kind <= 1) attrs.set("pads", pads);
    if (pad_kind == 1) attrs.set("output_padding", output_padding);
    if (pad_kind == 2) {
      ints shape(spatial);
      for (size_t i = 0; i < spatial; ++i)
        shape[i] = (x[2 + i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 -
                   rng.integer(0, kernel[i] - 1) + output_padding[i];
      attrs.set("output_shape", shape);
    }
    if (pad_kind == 3) attrs.set("auto_pad", rng.pick<std::string>({"SAME_UPPER", "SAME_LOWER"}));
    Case c;
    c.node = make_node("ConvTranspose", attrs);
    c.inputs = {rng.tensor(x), rng.tensor(w),
                rng.chance(0.7) ? rng.tensor({group * out_per_group}) : Tensor()};
    c.constant = {false, k % 6 != 5, true};
    c.input_layouts = {layout};
    c.output_layout = layout;
    int64_t reduction = channels / group;
    for (int64_t d : kernel) reduction *= d;
    c.tolerance = {1e-4, 2e-6 * static_cast<double>(reduction)};
    c.fast_implementation = true;
    // SAME with a kernel shorter than the stride pads by a negative amount (output positions no
    // input reaches), which oneDNN does not take: the reference kernel runs those.
    if (pad_kind == 3)
      for (size_t i = 0; i < spatial; ++i)
        if (kernel[i] < strides[i]) c.must_accept = false;
    cases.push_back(c);
  }
  // An image decoder's last layer: few output channels (up to 8), plain tensors, run as a product
  // and its scatter (deconv.cpp's DeconvColumns): kernel 4 stride 2 pad 1 (DCGAN, pix2pix),
  // kernel 3 stride 2 pad 1 with output_padding, kernel 2 stride 2, odd strides and pads.
  for (int k = 0; k < 8; ++k) {
    const int64_t kh = k % 4 == 0 ? 4 : k % 4 == 1 ? 3 : k % 4 == 2 ? 2 : rng.integer(1, 5);
    const int64_t kw = k % 4 == 3 ? rng.integer(1, 5) : kh;
    const int64_t sh = k % 4 == 3 ? rng.integer(1, 3) : 2, sw = k % 4 == 3 ? rng.integer(1, 3) : 2;
    const int64_t ph = kh == 2 ? 0 : rng.integer(0, (kh - 1) / 2);
    const int64_t pw = kw == 2 ? 0 : rng.integer(0, (kw - 1) / 2);
    const int64_t in_channels = rng.integer(1, 40), out_channels = rng.integer(1, 8);
    const ints x{rng.integer(1, 2), in_channels, rng.integer(2, 20), rng.integer(2, 20)};
    Attributes attrs;
    attrs.set("strides", ints{sh, sw});
    attrs.set("pads", ints{ph, pw, ph, pw});
    if (k % 4 == 1) attrs.set("output_padding", ints{1, 1});
    Case c;
    c.node = make_node("ConvTranspose", attrs);
    c.inputs = {rng.tensor(x), rng.tensor({in_channels, out_channels, kh, kw}),
                k % 3 == 0 ? Tensor() : rng.tensor({out_channels})};
    c.constant = {false, k != 5, true};
    c.tolerance = {1e-4, 2e-6 * static_cast<double>(in_channels * kh * kw)};
    c.implementation = "dnnl:deconv_columns";
    cases.push_back(c);
  }
  return cases;
}

// Convolutions to 1-4 channels (a network's last layer, a head) reading the activation layouts
// of this ISA (channel blocks, channels-last) into a plain output: troupe's loops
// (kernels/dnnl/narrow_conv.cpp). Kernels 1x2 to 9x9, strides and dilations 1-2, symmetric and
// asymmetric pads, with and without bias, no activation, ReLU in the store or another fused one
// after, constant weights and weights given at run time, batch 1-2, widths past one column tile.
std::vector<Case> narrow_conv_cases(Rng& rng) {
  std::vector<Case> cases;
  const int64_t block = native_block();
  const std::vector<TensorLayout> layouts = {TensorLayout::blocked(block),
                                             TensorLayout::channels_last_order()};
  const std::vector<std::string> activations = {"", "Relu", "Sigmoid", "Tanh"};
  for (int k = 0; k < 36; ++k) {
    const TensorLayout layout = layouts[static_cast<size_t>(k) % layouts.size()];
    const int64_t channels =
        (layout.channels_last ? rng.pick(ints{8, 16}) : block) * rng.integer(1, 4);
    const int64_t out = 1 + k % 4;
    // 1x1 kernels stay oneDNN's; 1xk and kx1 ones do not.
    const int64_t kh = rng.pick(ints{1, 3, 5, 9}),
                  kw = kh == 1 || k % 5 == 0 ? rng.integer(2, 4) : kh;
    const int64_t sh = rng.integer(1, 2), sw = rng.integer(1, 2);
    const int64_t dh = kh > 1 && rng.chance(0.2) ? 2 : 1, dw = kw > 1 && rng.chance(0.2) ? 2 : 1;
    const int64_t ph = rng.integer(0, (kh - 1) * dh / 2 + 1),
                  pw = rng.integer(0, (kw - 1) * dw / 2);
    const int64_t h = rng.integer((kh - 1) * dh + 1, 20);
    const int64_t w = k % 6 == 0 ? rng.integer(70, 140) : rng.integer((kw - 1) * dw + 1, 30);
    Attributes attrs;
    attrs.set("strides", ints{sh, sw});
    attrs.set("dilations", ints{dh, dw});
    attrs.set("pads", ints{ph, pw, k % 3 == 0 ? 0 : ph, pw});
    const std::string activation = activations[static_cast<size_t>(k / 4) % activations.size()];
    if (!activation.empty()) attrs.set("fused_activation", activation);
    Case c;
    c.node = make_node("Conv", attrs);
    c.inputs = {rng.tensor({rng.integer(1, 2), channels, h, w}),
                rng.tensor({out, channels, kh, kw}), k % 4 == 1 ? Tensor() : rng.tensor({out})};
    c.constant = {false, k % 7 != 3, true};
    c.input_layouts = {layout};
    c.tolerance = {1e-4, 2e-6 * static_cast<double>(channels * kh * kw)};
    c.implementation = "dnnl:narrow_conv";
    cases.push_back(c);
  }
  return cases;
}

// Max and average pooling of 4-D activations in each layout of this ISA, channel counts its block
// divides.
std::vector<Case> pooling_layout_cases(Rng& rng) {
  const std::vector<TensorLayout> layouts = activation_layouts();
  std::vector<Case> cases;
  for (int k = 0; k < 24; ++k) {
    const TensorLayout layout = layouts[k % layouts.size()];
    const int64_t unit = layout.channel_block ? layout.channel_block : 3;
    const bool global = k % 6 == 5;
    const char* op = global ? (k % 2 ? "GlobalMaxPool" : "GlobalAveragePool")
                            : (k % 2 ? "MaxPool" : "AveragePool");
    ints x{rng.integer(1, 2), unit * rng.integer(1, 3), rng.integer(4, 13), rng.integer(4, 13)};
    Attributes attrs;
    if (!global) {
      const ints kernel{rng.integer(1, 3), rng.integer(1, 3)};
      attrs.set("kernel_shape", kernel);
      attrs.set("strides", ints{rng.integer(1, 2), rng.integer(1, 2)});
      attrs.set("pads", ints{rng.integer(0, kernel[0] - 1), rng.integer(0, kernel[1] - 1),
                             rng.integer(0, kernel[0] - 1), rng.integer(0, kernel[1] - 1)});
    }
    Case c;
    c.node = make_node(op, attrs);
    c.inputs = {rng.tensor(x, -3, 3)};
    c.constant = {false};
    c.input_layouts = {layout};
    c.output_layout = layout;
    c.tolerance = {1e-5, 1e-6};
    c.fast_implementation = true;
    cases.push_back(c);
  }
  return cases;
}

// Unary activations and BatchNormalization on 4-D activations in each layout of this ISA, as the
// graph compiler hands them over when they are not fused: the output in the input's layout, in
// plain (a plain-only reader), or laid out from a plain input (a plain-only writer); channel
// counts the block divides.
std::vector<Case> activation_layout_cases(Rng& rng) {
  const std::vector<TensorLayout> layouts = activation_layouts();
  const std::vector<std::string> unary = {"Relu",  "Sigmoid",   "HardSigmoid", "Clip",
                                          "Swish", "HardSwish", "Tanh",        "LeakyRelu"};
  std::vector<Case> cases;
  for (int k = 0; k < 36; ++k) {
    const TensorLayout layout = layouts[static_cast<size_t>(k) % layouts.size()];
    const int64_t unit = layout.channel_block ? layout.channel_block : 3;
    const int64_t channels = unit * rng.integer(1, 3);
    const ints x{rng.integer(1, 2), channels, rng.integer(1, 9), rng.integer(1, 9)};
    Case c;
    if (k % 3 == 2) {
      Attributes attrs;
      if (rng.chance(0.5)) attrs.set("epsilon", rng.real(1e-6, 1e-2));
      // Half with the Relu the graph compiler fuses into a normalization (DenseNet's joins).
      if (k % 2 == 0) attrs.set("fused_activation", std::string("Relu"));
      c.node = make_node("BatchNormalization", attrs);
      c.inputs = {rng.tensor(x, -3, 3), rng.tensor({channels}, 0.5, 2), rng.tensor({channels}),
                  rng.tensor({channels}), rng.tensor({channels}, 0.1, 2)};
      c.constant = {false, true, true, true, true};
      c.tolerance = {1e-5, 1e-5};
    } else {
      const std::string& op = unary[static_cast<size_t>(k / 3) % unary.size()];
      Attributes attrs;
      if (op == "Clip") attrs = Attributes{{"min", -1.0}, {"max", 1.5}};
      c.node = make_node(op, attrs);
      c.inputs = {rng.tensor(x, -4, 4)};
      c.constant = {false};
      c.tolerance = {1e-5, 1e-6};
    }
    // Same layout out, plain out, or plain in and laid out.
    const int mix = (k / 6) % 3;
    c.input_layouts.assign(c.inputs.size(), TensorLayout{});
    c.input_layouts[0] = mix == 2 ? TensorLayout{} : layout;
    c.output_layout = mix == 1 ? TensorLayout{} : layout;
    c.must_accept = true;
    c.fast_implementation = true;
    cases.push_back(c);
  }
  return cases;
}

// InstanceNormalization over 1-D to 3-D instances, batches of 1 to 3, 4-D ones in each layout of
// this ISA (laid out in, out, or both), with and without epsilon; the statistics are the data's.
std::vector<Case> instance_norm_cases(Rng& rng) {
  const std::vector<TensorLayout> layouts = activation_layouts();
  std::vector<Case> cases;
  for (int k = 0; k < 24; ++k) {
    const size_t spatial = k % 6 == 4 ? 1 : k % 6 == 5 ? 3 : 2;
    const TensorLayout layout =
        spatial == 2 ? layouts[static_cast<size_t>(k) % layouts.size()] : TensorLayout{};
    const int64_t unit = layout.channel_block ? layout.channel_block : 3;
    const int64_t channels = unit * rng.integer(1, 3);
    ints x{rng.integer(1, 3), channels};
    for (size_t d = 0; d < spatial; ++d) x.push_back(rng.integer(1, spatial == 3 ? 6 : 24));
    Attributes attrs;
    if (rng.chance(0.5)) attrs.set("epsilon", rng.real(1e-6, 1e-2));
    Case c;
    c.node = make_node("InstanceNormalization", attrs);
    c.inputs = {rng.tensor(x, -3, 5), rng.tensor({channels}, 0.5, 2), rng.tensor({channels})};
    c.constant = {false, true, k % 4 != 3};
    const int mix = (k / 3) % 3;  // laid out in and out, plain out, plain in
    c.input_layouts = {mix == 2 ? TensorLayout{} : layout, TensorLayout{}, TensorLayout{}};
    c.output_layout = mix == 1 ? TensorLayout{} : layout;
    c.tolerance = {1e-4, 1e-5};
    c.fast_implementation = true;
    cases.push_back(c);
  }
  // GroupNorm's export, [N, groups, C / groups x H x W], on troupe's row loops: rows longer than
  // a summing block (4096), of odd lengths, of one element, with a mean far from 0.
  for (const ints& x : std::vector<ints>{{1, 32, 25088}, {2, 8, 4099}, {3, 5, 1}, {1, 4, 777}}) {
    Case c;
    c.node = make_node("InstanceNormalization");
    Tensor data = rng.tensor(x, -3, 5);
    if (x[2] == 777)
      for (int64_t i = 0; i < data.size(); ++i) data.data<float>()[i] += 1000.f;
    c.inputs = {data, rng.tensor({x[1]}, 0.5, 2), rng.tensor({x[1]})};
    c.constant = {false, true, true};
    c.tolerance = {1e-4, 1e-4};
    c.implementation = "dnnl:instance_norm_rows";
    cases.push_back(c);
  }
  return cases;
}

// PRelu as models have it: a slope per channel ([C,1,1] as PyTorch exports nn.PReLU(C), or
// [1,C,1,1]) or one slope ([1]) on 4-D activations in each layout of this ISA (laid out in, out, or
// both), and on plain tensors a slope along the last axis, one per element, or of lower rank.
std::vector<Case> prelu_cases(Rng& rng) {
  const std::vector<TensorLayout> layouts = activation_layouts();
  std::vector<Case> cases;
  for (int k = 0; k < 30; ++k) {
    Case c;
    c.node = make_node("PRelu");
    c.must_accept = true;
    c.fast_implementation = true;
    c.tolerance = {1e-6, 1e-7};
    c.constant = {false, k % 5 != 4};
    if (k < 18) {
      const TensorLayout layout = layouts[static_cast<size_t>(k) % layouts.size()];
      const int64_t unit = layout.channel_block ? layout.channel_block : 3;
      const int64_t channels = unit * rng.integer(1, 3);
      const ints x{rng.integer(1, 2), channels, rng.integer(1, 9), rng.integer(1, 9)};
      const ints slope = k % 3 == 0   ? ints{channels, 1, 1}
                         : k % 3 == 1 ? ints{1, channels, 1, 1}
                                      : ints{1};
      c.inputs = {rng.tensor(x, -4, 4), rng.tensor(slope, -0.5, 0.5)};
      const int mix = (k / 3) % 3;  // laid out in and out, plain out, plain in
      c.input_layouts = {mix == 2 ? TensorLayout{} : layout, TensorLayout{}};
      c.output_layout = mix == 1 ? TensorLayout{} : layout;
    } else {
      const ints x = k % 2 ? ints{2, 7, 33} : ints{3, 5, 6, 7};
      ints slope = x;
      if (k % 3 == 0) slope = {x.back()};
      if (k % 3 == 1) slope.erase(slope.begin());
      c.inputs = {rng.tensor(x, -4, 4), rng.tensor(slope, -0.5, 0.5)};
    }
    cases.push_back(c);
  }
  return cases;
}

// Broadcasts oneDNN's JIT kernels do not take (the second operand 1 along middle axes, as a
// shifted-window attention mask [1,W,1,N,N] over [1,W,H,N,N], or along the innermost ones):
// never oneDNN's reference kernel.
std::vector<Case> binary_broadcast_cases(Rng& rng) {
  std::vector<Case> cases;
  int k = 0;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    for (int i = 0; i < 6; ++i, ++k) {
      const size_t rank = static_cast<size_t>(3 + k % 3);
      ints full = rng.dims(rank, 2, 7);
      ints small = full;
      // At least one middle axis broadcast; the innermost kept (rows) or dropped (scalars).
      small[1 + static_cast<size_t>(rng.integer(0, static_cast<int64_t>(rank) - 3))] = 1;
      if (rng.chance(0.4)) small[0] = 1;
      if (i % 4 == 3) small[rank - 1] = 1;
      const double lo = std::string(op) == "Div" ? 0.5 : -2;
      Case c;
      c.node = make_node(op);
      c.inputs = {rng.tensor(full, lo, 2), rng.tensor(small, lo, 2)};
      c.constant = {false, rng.chance(0.5)};
      c.must_accept = true;
      c.fast_implementation = true;
      c.tolerance = {1e-6, 1e-7};
      cases.push_back(c);
    }
  }
  // Both operands broadcast, or the left one of any op (Sub and Div cannot swap): rows with
  // each operand's own strides, some large enough for several threads (RAFT's coordinates,
  // [N,1,1,2] + [1,7,7,2]).
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    for (int i = 0; i < 4; ++i, ++k) {
      const size_t rank = static_cast<size_t>(2 + k % 4);
      ints full = rng.dims(rank, 2, 6);
      ints left = full, right = full;
      for (size_t d = 0; d < rank; ++d) {
        if (rng.chance(0.4)) left[d] = 1;
        if (rng.chance(0.4)) right[d] = 1;
      }
      left[static_cast<size_t>(rng.integer(0, static_cast<int64_t>(rank) - 1))] = 1;
      if (i == 3) {
        full = {3000, 7, 7, 2};
        left = {3000, 1, 1, 2};
        right = {1, 7, 7, 2};
      }
      if (i == 2) left.erase(left.begin());  // fewer axes, aligned to the right
      const double lo = std::string(op) == "Div" ? 0.5 : -2;
      Case c;
      c.node = make_node(op);
      c.inputs = {rng.tensor(left, lo, 2), rng.tensor(right, lo, 2)};
      c.constant = {false, rng.chance(0.5)};
      c.must_accept = true;
      c.fast_implementation = true;
      c.tolerance = {1e-6, 1e-7};
      cases.push_back(c);
    }
  }
  // A Swin-T mask at its real shape.
  Case swin;
  swin.node = make_node("Add");
  swin.inputs = {rng.tensor({1, 16, 3, 49, 49}), rng.tensor({1, 16, 1, 49, 49})};
  swin.constant = {false, true};
  swin.must_accept = true;
  swin.implementation = "dnnl:broadcast_rows";  // oneDNN 2.6's JIT declines it on every ISA
  swin.tolerance = {1e-6, 1e-7};
  cases.push_back(swin);
  return cases;
}

// Concat of 1 to 4 f32 inputs along any axis of ranks 1-5, some inputs empty along that axis (and
// the same joins of i64, i32, u8 and bool values, plain), and 4-D joins along the channels in each
// activation layout of this ISA (whole blocks of channels).
std::vector<Case> concat_cases(Rng& rng) {
  std::vector<Case> cases;
  const ElementType other_types[] = {ElementType::i64, ElementType::i32, ElementType::u8,
                                     ElementType::boolean};
  for (int k = 0; k < 40; ++k) {
    const bool typed = k >= 24;
    const ElementType type = other_types[k % 4];
    const size_t rank = static_cast<size_t>(rng.integer(1, 5));
    const ints base = rng.dims(rank, 1, 6);
    const int64_t axis = rng.integer(0, static_cast<int64_t>(rank) - 1);
    Case c;
    Attributes attrs;
    attrs.set("axis", rng.chance(0.3) ? axis - static_cast<int64_t>(rank) : axis);
    c.node = make_node("Concat", attrs);
    const int64_t n = rng.integer(1, 4);
    for (int64_t i = 0; i < n; ++i) {
      ints dims = base;
      dims[static_cast<size_t>(axis)] = k % 6 == 5 && i == 0 ? 0 : rng.integer(1, 5);
      Tensor values = rng.tensor(dims, -3, 3);
      if (typed) {  // whole numbers in [0, 6) of the type
        Tensor t(type, Shape(dims));
        for (int64_t e = 0; e < values.size(); ++e) {
          const auto v = static_cast<int64_t>(std::floor(values.data<float>()[e] + 3));
          if (type == ElementType::i64) t.data<int64_t>()[e] = v;
          if (type == ElementType::i32) t.data<int32_t>()[e] = static_cast<int32_t>(v);
          if (type == ElementType::u8) t.data<uint8_t>()[e] = static_cast<uint8_t>(v);
          if (type == ElementType::boolean) t.data<bool>()[e] = v % 2 == 1;
        }
        values = t;
      }
      c.inputs.push_back(values);
      c.constant.push_back(rng.chance(0.2));
    }
    c.must_accept = true;
    c.fast_implementation = true;
    c.tolerance = {0, 0};
    cases.push_back(c);
  }
  const std::vector<TensorLayout> layouts = activation_layouts();
  for (int k = 0; k < 12; ++k) {
    const TensorLayout layout = layouts[static_cast<size_t>(k) % layouts.size()];
    const int64_t unit = layout.channel_block ? layout.channel_block : 3;
    const int64_t batch = rng.integer(1, 2), h = rng.integer(1, 9), w = rng.integer(1, 9);
    Case c;
    c.node = make_node("Concat", Attributes{{"axis", int64_t{1}}});
    const int64_t n = rng.integer(2, 4);
    for (int64_t i = 0; i < n; ++i) {
      c.inputs.push_back(rng.tensor({batch, unit * rng.integer(1, 3), h, w}));
      c.constant.push_back(false);
      c.input_layouts.push_back(layout);
    }
    c.output_layout = layout;
    c.must_accept = true;
    c.implementation = "dnnl:concat_rows";
    c.tolerance = {0, 0};
    cases.push_back(c);
  }
  return cases;
}

// Binary ops on 4-D activations (3-D ones, as between 1-D convolutions, in a third of the cases)
// in each layout of this ISA, as between convolutions: both operands full size (the second
// sometimes plain), or the second (either side for commutative ops) per channel [N or 1, C, 1, 1]
// ([N or 1, C, 1]) and plain, as a squeeze-and-excitation block's Mul(x, s); channel counts the
// block divides.
std::vector<Case> binary_layout_cases(Rng& rng) {
  const std::vector<TensorLayout> layouts = activation_layouts();
  std::vector<Case> cases;
  int k = 0;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    const bool commutative = std::string(op) != "Sub" && std::string(op) != "Div";
    for (int i = 0; i < 6; ++i, ++k) {
      const TensorLayout layout = layouts[static_cast<size_t>(k) % layouts.size()];
      const int64_t unit = layout.channel_block ? layout.channel_block : 3;
      ints x{rng.integer(1, 2), unit * rng.integer(1, 4), rng.integer(1, 9), rng.integer(1, 9)};
      ints s{rng.chance(0.5) ? 1 : x[0], x[1], 1, 1};
      if (i >= 4) {  // 1-D
        x.pop_back();
        s.pop_back();
      }
      const bool per_channel = i % 2 == 1;
      const bool small_left = per_channel && commutative && i % 4 == 3;
      const double lo = std::string(op) == "Div" ? 0.5 : -2;
      Tensor full = rng.tensor(x, lo, 2);
      Tensor other = rng.tensor(per_channel ? s : x, lo, 2);
      Case c;
      c.node = make_node(op);
      c.inputs = small_left ? std::vector<Tensor>{other, full} : std::vector<Tensor>{full, other};
      c.constant = {false, false};
      // A full-size operand may come plain (a value a plain-only kernel also reads): reordered.
      const TensorLayout other_layout = per_channel || i == 2 ? TensorLayout{} : layout;
      c.input_layouts = small_left ? std::vector<TensorLayout>{other_layout, layout}
                                   : std::vector<TensorLayout>{layout, other_layout};
      c.output_layout = layout;
      c.must_accept = true;
      c.fast_implementation = true;
      c.tolerance = {1e-6, 1e-7};
      cases.push_back(c);
    }
  }
  return cases;
}

std::vector<Case> pooling_cases(Rng& rng) {
  std::vector<Case> cases;
  for (const char* op : {"MaxPool", "AveragePool"}) {
    const bool max = std::string(op) == "MaxPool";
    for (int k = 0; k < 40; ++k) {
      const size_t spatial = k % 5 == 3 ? 1 : k % 5 == 4 ? 3 : 2;
      ints kernel(spatial), strides(spatial), dilations(spatial, 1), pads(2 * spatial);
      ints x{rng.integer(1, 2), rng.integer(1, 8)};
      for (size_t i = 0; i < spatial; ++i) {
        kernel[i] = rng.integer(1, 3);
        strides[i] = rng.integer(1, 3);
        if (max && rng.chance(0.25)) dilations[i] = 2;
        pads[i] = rng.integer(0, kernel[i] - 1);
        pads[i + spatial] = rng.integer(0, kernel[i] - 1);
        x.push_back(rng.integer((kernel[i] - 1) * dilations[i] + 1 + 1, spatial == 3 ? 7 : 12));
      }
      Attributes attrs;
      attrs.set("kernel_shape", kernel);
      if (rng.chance(0.8)) attrs.set("strides", strides);
      if (dilations != ints(spatial, 1)) attrs.set("dilations", dilations);
      const bool ceil_mode = rng.chance(0.3);
      if (ceil_mode) attrs.set("ceil_mode", int64_t{1});
      const bool include_pad = !max && rng.chance(0.4);
      if (include_pad) attrs.set("count_include_pad", int64_t{1});
      const int pad_kind = static_cast<int>(rng.integer(0, 3));
      if (pad_kind <= 1)
        attrs.set("pads", pads);
      else if (pad_kind == 2)
        attrs.set("auto_pad", rng.pick<std::string>({"SAME_UPPER", "SAME_LOWER", "VALID"}));
      Case c;
      c.node = make_node(op, attrs);
      c.inputs = {rng.tensor(x, -3, 3)};
      c.constant = {false};
      // Averages counting padding under ceil_mode divide by a count oneDNN cannot express.
      c.must_accept = !(include_pad && ceil_mode);
      c.tolerance = {1e-5, 1e-6};
      cases.push_back(c);
    }
  }
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
    for (int k = 0; k < 12; ++k) {
      ints x{rng.integer(1, 3), rng.integer(1, 16)};
      const ints sp = rng.dims(static_cast<size_t>(rng.integer(1, 3)), 1, 12);
      x.insert(x.end(), sp.begin(), sp.end());
      Case c;
      c.node = make_node(op);
      c.inputs = {rng.tensor(x, -3, 3)};
      c.constant = {false};
      c.tolerance = {1e-5, 1e-6};
      cases.push_back(c);
    }
  }
  return cases;
}

// Global pooling of laid-out f32 runs troupe's loop over rows of lanes: blocks of 16 and 8,
// channels-last rows of 16-lane groups, 8 lanes and single ones (45 = 16 + 16 + 8 + 5), fewer
// positions than the loop's four accumulators, 1-D to 3-D; the output plain or laid out.
std::vector<Case> laid_out_global_pooling_cases(Rng& rng) {
  struct Shape_ {
    ints dims;
    TensorLayout layout;
  };
  const std::vector<Shape_> shapes = {{{1, 1024, 1024}, TensorLayout::blocked(16)},
                                      {{2, 32, 7, 7}, TensorLayout::blocked(16)},
                                      {{1, 16, 3}, TensorLayout::blocked(16)},
                                      {{2, 24, 5, 1}, TensorLayout::blocked(8)},
                                      {{1, 16, 2, 3, 4}, TensorLayout::blocked(8)},
                                      {{2, 45, 6, 6}, TensorLayout::channels_last_order()},
                                      {{1, 64, 1}, TensorLayout::channels_last_order()},
                                      {{3, 5, 9}, TensorLayout::channels_last_order()}};
  std::vector<Case> cases;
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"})
    for (const Shape_& shape : shapes)
      for (const bool plain_output : {true, false}) {
        Case c;
        c.node = make_node(op);
        c.inputs = {rng.tensor(shape.dims, -3, 3)};
        c.constant = {false};
        c.input_layouts = {shape.layout};
        if (!plain_output) c.output_layout = shape.layout;
        c.tolerance = {1e-5, 1e-5};
        c.implementation =
            std::string("dnnl:") +
            (std::string(op) == "GlobalMaxPool" ? "global_max_rows" : "global_mean_rows");
        cases.push_back(c);
      }
  return cases;
}

std::vector<Case> normalization_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 20; ++k) {
    const int64_t channels = rng.integer(1, 16);
    ints x{rng.integer(1, 3), channels};
    const ints sp = rng.dims(static_cast<size_t>(rng.integer(0, 3)), 1, 9);
    x.insert(x.end(), sp.begin(), sp.end());
    Attributes attrs;
    if (rng.chance(0.5)) attrs.set("epsilon", rng.real(1e-6, 1e-2));
    if (k % 2 == 1) attrs.set("fused_activation", std::string("Relu"));
    Case c;
    c.node = make_node("BatchNormalization", attrs);
    c.inputs = {rng.tensor(x, -3, 3), rng.tensor({channels}, 0.5, 2), rng.tensor({channels}),
                rng.tensor({channels}), rng.tensor({channels}, 0.1, 2)};
    c.constant = {false, true, true, true, true};
    c.tolerance = {1e-5, 1e-5};
    cases.push_back(c);
  }
  // Large enough for the row loops to split over threads: a 1-D convolution net's [N, C, L], a
  // BatchNorm1d over [N, C] features, a 3-D convolution's [N, C, D, H, W].
  for (const ints& x : {ints{2, 96, 300}, ints{700, 64}, ints{1, 24, 6, 20, 20}, ints{3, 5, 13}}) {
    const int64_t channels = x[1];
    Attributes attrs;
    if (x[0] != 2) attrs.set("fused_activation", std::string("Relu"));
    Case c;
    c.node = make_node("BatchNormalization", attrs);
    c.inputs = {rng.tensor(x, -3, 3), rng.tensor({channels}, 0.5, 2), rng.tensor({channels}),
                rng.tensor({channels}), rng.tensor({channels}, 0.1, 2)};
    c.constant = {false, true, true, true, true};
    c.tolerance = {1e-5, 1e-5};
    cases.push_back(c);
  }
  for (int k = 0; k < 24; ++k) {
    const int64_t rank = rng.integer(1, 4);
    const ints x = rng.dims(static_cast<size_t>(rank), 1, 20);
    const int64_t axis = rng.chance(0.5) ? -1 : rng.integer(-rank, rank - 1);
    Attributes attrs;
    if (axis != -1 || rng.chance(0.5)) attrs.set("axis", axis);
    if (rng.chance(0.5)) attrs.set("epsilon", rng.real(1e-6, 1e-3));
    const ints normalized(x.begin() + (axis < 0 ? axis + rank : axis), x.end());
    Case c;
    c.node = make_node("LayerNormalization", attrs);
    c.inputs = {rng.tensor(x, -3, 3), rng.tensor(normalized, 0.5, 2)};
    if (rng.chance(0.7)) c.inputs.push_back(rng.tensor(normalized));
    c.constant = {false, true, true};
    c.tolerance = {1e-4, 1e-5};
    cases.push_back(c);
  }
  return cases;
}

// Slice (positive and negative steps, some axes, starts/ends beyond the bounds) and constant-mode
// Pad (zero and non-zero fill, some axes): the strided copies against the reference.
std::vector<Case> slice_pad_cases(Rng& rng) {
  std::vector<Case> cases;
  auto i64 = [](const ints& v) {
    return Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v);
  };
  for (int k = 0; k < 40; ++k) {
    const ints x = rng.dims(static_cast<size_t>(rng.integer(1, 4)), 1, 9);
    const auto rank = static_cast<int64_t>(x.size());
    ints starts, ends, axes, steps;
    for (int64_t d = 0; d < rank; ++d) {
      if (rng.chance(0.4)) continue;
      const int64_t step = rng.chance(0.25) ? -rng.integer(1, 3) : rng.integer(1, 3);
      starts.push_back(rng.integer(-x[d] - 2, x[d] + 2));
      ends.push_back(rng.chance(0.2) ? (step > 0 ? std::numeric_limits<int64_t>::max()
                                                 : std::numeric_limits<int64_t>::min())
                                     : rng.integer(-x[d] - 2, x[d] + 2));
      axes.push_back(rng.chance(0.5) ? d : d - rank);
      steps.push_back(step);
    }
    if (starts.empty()) {
      starts = {0};
      ends = {x[0]};
      axes = {0};
      steps = {1};
    }
    Case c;
    c.node = make_node("Slice");
    c.inputs = {rng.tensor(x), i64(starts), i64(ends), i64(axes), i64(steps)};
    c.constant = {false, true, true, true, true};
    c.tolerance = {0, 0};
    cases.push_back(c);
  }
  // Split along any axis (negative too) into two to four parts of random lengths (some empty),
  // as the split input or equal parts; one large last-axis split (RAFT's coordinates).
  for (int k = 0; k < 24; ++k) {
    ints x = rng.dims(static_cast<size_t>(rng.integer(1, 4)), 1, 9);
    if (k == 23) x = {700, 7, 7, 2};
    const auto rank = static_cast<int64_t>(x.size());
    const int64_t axis = k == 23 ? -1 : rng.integer(-rank, rank - 1);
    const int64_t length = x[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
    Attributes attrs;
    attrs.set("axis", axis);
    Case c;
    c.inputs = {rng.tensor(x)};
    size_t parts = 2;
    if (k % 3 != 0 || length < 2) {
      ints split;
      int64_t left = length;
      parts = static_cast<size_t>(rng.integer(1, 4));
      for (size_t p = 0; p + 1 < parts; ++p) {
        split.push_back(rng.integer(0, left));
        left -= split.back();
      }
      split.push_back(left);
      c.inputs.push_back(i64(split));
    } else {
      parts = length % 2 == 0 ? 2 : 1;
    }
    c.node = make_node("Split", attrs, parts);
    c.num_outputs = parts;
    c.constant.assign(c.inputs.size(), true);
    c.constant[0] = false;
    c.tolerance = {0, 0};
    // A 4-D split along the channels into parts that all have elements runs as the channel
    // split, which can keep an activation layout (below); the rest as strided copies.
    bool channel_split = rank == 4 && (axis + rank) % rank == 1;
    if (channel_split && c.inputs.size() > 1)
      for (int64_t part : c.inputs[1].to_vector<int64_t>())
        channel_split = channel_split && part > 0;
    c.implementation = channel_split ? "dnnl:split_rows" : "dnnl:strided_copy";
    cases.push_back(c);
  }
  // Splits along the channels between convolutions (MixNet's mixed kernels, a CSP block's halves)
  // in each activation layout of this ISA: parts of whole blocks, read and written in the layout.
  const std::vector<TensorLayout> layouts = activation_layouts();
  for (int k = 0; k < 12; ++k) {
    const TensorLayout layout = layouts[static_cast<size_t>(k) % layouts.size()];
    const int64_t unit = layout.channel_block ? layout.channel_block : 3;
    ints split;
    for (int64_t p = rng.integer(2, 4); p > 0; --p) split.push_back(unit * rng.integer(1, 3));
    int64_t channels = 0;
    for (int64_t part : split) channels += part;
    Case c;
    c.inputs = {rng.tensor({rng.integer(1, 2), channels, rng.integer(1, 9), rng.integer(1, 9)}),
                i64(split)};
    c.node = make_node("Split", Attributes{{"axis", int64_t{1}}}, split.size());
    c.num_outputs = split.size();
    c.constant = {false, true};
    c.input_layouts = {layout};
    c.output_layout = layout;
    c.every_output_laid_out = true;
    c.tolerance = {0, 0};
    c.implementation = "dnnl:split_rows";
    cases.push_back(c);
  }
  for (int k = 0; k < 24; ++k) {
    const ints x = rng.dims(static_cast<size_t>(rng.integer(1, 4)), 1, 7);
    ints pads(2 * x.size());
    for (auto& p : pads) p = rng.integer(0, 3);
    Case c;
    c.node = make_node("Pad");
    c.inputs = {rng.tensor(x), i64(pads)};
    if (rng.chance(0.5))
      c.inputs.push_back(
          Tensor::from_vector<float>(Shape{}, {static_cast<float>(rng.real(-2, 2))}));
    c.constant.assign(c.inputs.size(), true);
    c.constant[0] = false;
    c.tolerance = {0, 0};
    cases.push_back(c);
  }
  // Negative pads crop (RWKV's token shift: ZeroPad2d((0, 0, 1, -1))), on either side, mixed with
  // positive ones, some cropping a whole axis away so that only the fill is left along it.
  for (int k = 0; k < 24; ++k) {
    const ints x = rng.dims(static_cast<size_t>(rng.integer(1, 4)), 1, 7);
    ints pads(2 * x.size());
    for (size_t d = 0; d < x.size(); ++d) {
      pads[d] = rng.integer(-x[d], 3);
      pads[d + x.size()] = std::max(rng.integer(-x[d], 3), 1 - x[d] - pads[d]);
    }
    Case c;
    c.node = make_node("Pad");
    c.inputs = {rng.tensor(x), i64(pads)};
    if (k % 2 == 1)
      c.inputs.push_back(
          Tensor::from_vector<float>(Shape{}, {static_cast<float>(rng.real(-2, 2))}));
    c.constant.assign(c.inputs.size(), true);
    c.constant[0] = false;
    c.tolerance = {0, 0};
    c.implementation = "dnnl:strided_copy";
    cases.push_back(c);
  }
  // Reflect and edge padding: any axes, pads wider than the axis (reflected again and again),
  // and image borders as ReflectionPad2d/ReplicationPad2d write them ([N,C,H,W], H and W only),
  // some large enough to be copied by several threads.
  for (int k = 0; k < 30; ++k) {
    const bool image = k % 3 == 2;
    const ints x = image ? ints{1, rng.integer(1, 48), rng.integer(2, 80), rng.integer(2, 80)}
                         : rng.dims(static_cast<size_t>(rng.integer(1, 4)), 1, 7);
    ints pads(2 * x.size(), 0);
    const bool reflect = k % 2 == 1;
    for (size_t d = 0; d < x.size(); ++d) {
      // ONNX has nothing to mirror along an axis of one element (the schema refuses it).
      if ((image && d < 2) || (reflect && x[d] == 1)) continue;
      pads[d] = rng.integer(0, image ? 3 : 9);
      pads[d + x.size()] = rng.chance(0.5) ? pads[d] : rng.integer(0, image ? 3 : 9);
    }
    Case c;
    c.node = make_node("Pad", Attributes{{"mode", std::string(reflect ? "reflect" : "edge")}});
    c.inputs = {rng.tensor(x), i64(pads)};
    c.constant = {false, true};
    c.tolerance = {0, 0};
    cases.push_back(c);
  }
  return cases;
}

// Expand (broadcast axes anywhere, a lower-rank input, f32 and i64), Tile (repeats of 1 to 3 on
// any axis, 0 too) and DepthToSpace/SpaceToDepth (DCR and CRD, blocks 2 and 3, f32 and u8): exact
// copies against the reference.
std::vector<Case> rearrangement_cases(Rng& rng) {
  auto i64 = [](const ints& v) {
    return Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v);
  };
  // The same values (whole numbers in [0, 200]) as another element type.
  auto as_type = [](const Tensor& t, ElementType type) {
    Tensor result(type, t.shape());
    for (int64_t i = 0; i < t.size(); ++i) {
      const auto v = static_cast<int64_t>(std::floor(t.data<float>()[i]));
      if (type == ElementType::i64) result.data<int64_t>()[i] = v;
      if (type == ElementType::u8) result.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    }
    return result;
  };
  std::vector<Case> cases;
  for (int k = 0; k < 16; ++k) {
    const ints out = rng.dims(static_cast<size_t>(rng.integer(1, 4)), 1, 9);
    ints in = out;
    for (auto& d : in)
      if (rng.chance(0.4)) d = 1;
    if (in.size() > 1 && rng.chance(0.3)) in.erase(in.begin());
    Case c;
    c.node = make_node("Expand");
    const Tensor x = rng.tensor(in, 0, 200);
    c.inputs = {k % 3 == 2 ? as_type(x, ElementType::i64) : x, i64(out)};
    c.constant = {false, true};
    c.tolerance = {0, 0};
    cases.push_back(c);
  }
  for (int k = 0; k < 16; ++k) {
    const ints x = rng.dims(static_cast<size_t>(rng.integer(1, 4)), 1, 7);
    ints repeats(x.size());
    for (auto& r : repeats) r = k == 15 ? 0 : rng.integer(1, 3);
    Case c;
    c.node = make_node("Tile");
    c.inputs = {rng.tensor(x), i64(repeats)};
    c.constant = {false, true};
    c.tolerance = {0, 0};
    cases.push_back(c);
  }
  for (int k = 0; k < 24; ++k) {
    const bool to_space = k % 2 == 0;
    const int64_t b = rng.integer(2, 3);
    const int64_t n = rng.integer(1, 2), ch = rng.integer(1, 5), h = rng.integer(1, 6) * b,
                  w = rng.integer(1, 9) * b;
    Attributes attrs{{"blocksize", b}};
    if (to_space && k % 4 == 2) attrs.set("mode", std::string("CRD"));
    Case c;
    c.node = make_node(to_space ? "DepthToSpace" : "SpaceToDepth", attrs);
    const Tensor x = to_space ? rng.tensor({n, ch * b * b, h / b, w / b}, 0, 200)
                              : rng.tensor({n, ch, h, w}, 0, 200);
    c.inputs = {k % 6 == 5 ? as_type(x, ElementType::u8) : x};
    c.constant = {false};
    c.tolerance = {0, 0};
    cases.push_back(c);
  }
  // The same between convolutions, in each activation layout of this ISA: channels-last for
  // every mode, blocked for DCR and SpaceToDepth over whole blocks of the space side's channels.
  const std::vector<TensorLayout> layouts = activation_layouts();
  for (int k = 0; k < 24; ++k) {
    const TensorLayout layout = layouts[static_cast<size_t>(k) % layouts.size()];
    const bool to_space = k % 2 == 0;
    const bool crd = to_space && k % 4 == 0 && layout.channel_block == 0;
    const int64_t b = rng.integer(2, 3);
    const int64_t unit = layout.channel_block ? layout.channel_block : 1;
    const int64_t n = rng.integer(1, 2), ch = unit * rng.integer(1, 3), h = rng.integer(1, 5) * b,
                  w = rng.integer(1, 6) * b;
    Attributes attrs{{"blocksize", b}};
    if (crd) attrs.set("mode", std::string("CRD"));
    Case c;
    c.node = make_node(to_space ? "DepthToSpace" : "SpaceToDepth", attrs);
    c.inputs = {to_space ? rng.tensor({n, ch * b * b, h / b, w / b}) : rng.tensor({n, ch, h, w})};
    c.constant = {false};
    c.input_layouts = {layout};
    c.output_layout = layout;
    c.tolerance = {0, 0};
    c.implementation = layout.is_plain() ? "dnnl:strided_copy" : "dnnl:shuffle_rows";
    cases.push_back(c);
  }
  return cases;
}

// Reductions that keep the innermost axis (a channel mean or max of an image, as CBAM's spatial
// attention takes it; over adjacent axes; over axes that are not adjacent, which the row kernel
// leaves to the reference), ArgMax/ArgMin along any axis with ties and select_last_index, and LRN
// of odd sizes in each layout of this ISA.
std::vector<Case> rows_and_lrn_cases(Rng& rng) {
  std::vector<Case> cases;
  const std::vector<std::string> reductions = {"ReduceMean", "ReduceMax",      "ReduceMin",
                                               "ReduceSum",  "ReduceProd",     "ReduceL1",
                                               "ReduceL2",   "ReduceSumSquare"};
  for (int k = 0; k < 40; ++k) {
    const std::string op = reductions[static_cast<size_t>(k) % reductions.size()];
    const ints x = k % 4 == 3 ? ints{1, 21, 96, 128}
                              : ints{rng.integer(1, 3), rng.integer(1, 9), rng.integer(1, 9),
                                     rng.integer(2, 9)};
    // The norms also over the last axis (F.normalize), which oneDNN 2.6 leaves to its reference.
    const bool norm = k % 8 >= 5;
    const ints axes = norm && k % 3 == 0 ? ints{-1}
                      : k % 5 == 4       ? ints{0, 2}
                      : k % 3 == 1       ? ints{1, 2}
                                         : ints{1};
    Attributes attrs{{"axes", axes}};
    if (rng.chance(0.5)) attrs.set("keepdims", int64_t{0});
    Case c;
    c.node = make_node(op, attrs);
    c.inputs = {op == "ReduceProd" ? rng.tensor(x, 0.9, 1.1) : rng.tensor(x, -2, 2)};
    c.constant = {false};
    c.tolerance = {1e-4, 1e-5};
    c.fast_implementation = true;
    cases.push_back(c);
  }
  for (int k = 0; k < 16; ++k) {
    const ints x = rng.dims(static_cast<size_t>(rng.integer(1, 4)), 1, 9);
    Attributes attrs;
    attrs.set("axis", rng.integer(-static_cast<int64_t>(x.size()), x.size() - 1));
    if (rng.chance(0.5)) attrs.set("keepdims", int64_t{0});
    if (rng.chance(0.5)) attrs.set("select_last_index", int64_t{1});
    Tensor t = rng.tensor(x, -3, 3);
    for (int64_t i = 0; i < t.size(); ++i)  // whole numbers: many ties
      t.data<float>()[i] = std::round(t.data<float>()[i]);
    Case c;
    c.node = make_node(k % 2 ? "ArgMin" : "ArgMax", attrs);
    c.inputs = {t};
    c.constant = {false};
    c.tolerance = {0, 0};
    cases.push_back(c);
  }
  // TopK along any axis, largest or smallest, K from 0 to the whole axis, with ties and NaNs
  // (ordered as the reference orders them), and a detector's top 100 of 25200 scores.
  for (int k = 0; k < 14; ++k) {
    const ints x =
        k == 13 ? ints{1, 25200} : rng.dims(static_cast<size_t>(rng.integer(1, 3)), 1, 12);
    const auto rank = static_cast<int64_t>(x.size());
    const int64_t axis = k == 13 ? 1 : rng.integer(0, rank - 1);
    Tensor t = rng.tensor(x, -3, 3);
    for (int64_t i = 0; i < t.size(); ++i) {
      float& v = t.data<float>()[i];
      if (k % 2 == 0) v = std::round(v);  // ties
      if (k % 5 == 1 && rng.chance(0.1)) v = std::nanf("");
    }
    Attributes attrs{{"axis", k % 3 == 0 ? axis - rank : axis}};
    if (k % 4 == 1) attrs.set("largest", int64_t{0});
    const int64_t n = x[static_cast<size_t>(axis)];
    Case c;
    c.node = make_node("TopK", attrs);
    c.inputs = {t, Tensor::from_vector<int64_t>(Shape{1}, {k == 13 ? 100 : rng.integer(0, n)})};
    c.constant = {false, true};
    c.num_outputs = 2;
    c.tolerance = {0, 0};
    cases.push_back(c);
  }
  // Along the innermost axis with K small next to it: the scan (else a partial sort). Ties,
  // NaNs, rows whose length is no multiple of the 16-wide compares, rows in ascending order
  // (every element displaces the worst kept: the scan gives up for a partial sort) and
  // descending order (none does), and single rows long enough to be split over threads.
  struct Scanned {
    ints dims;
    int64_t k;
    int order;  // 0 random, 1 ascending, 2 descending
  };
  const std::vector<Scanned> scanned = {
      {{64, 1024}, 20, 0}, {{3, 200}, 5, 0},     {{2, 4, 97}, 12, 0}, {{4, 500}, 30, 1},
      {{2, 500}, 30, 2},   {{1, 25200}, 100, 0}, {{5, 16}, 2, 0},     {{7, 33}, 1, 0},
      {{2, 4000}, 300, 0}, {{1, 70000}, 100, 0}, {{1, 70000}, 64, 1}, {{1, 66000}, 7, 2},
      {{3, 4000}, 8, 1},   {{2, 4000}, 8, 2}};
  for (size_t k = 0; k < scanned.size() * 2; ++k) {
    const Scanned& row = scanned[k / 2];
    Tensor t = rng.tensor(row.dims, -3, 3);
    float* v = t.data<float>();
    const int64_t n = row.dims.back();
    for (int64_t i = 0; i < t.size(); ++i) {
      if (row.order == 1) v[i] = static_cast<float>(i % n);
      if (row.order == 2) v[i] = static_cast<float>(n - i % n);
      if (k % 4 < 2) v[i] = std::round(v[i] * 2) / 2;  // ties, largest and smallest first
      if (k % 3 == 1 && rng.chance(0.02)) v[i] = std::nanf("");
    }
    Attributes attrs{{"axis", int64_t{-1}}};
    if (k % 2 == 1) attrs.set("largest", int64_t{0});
    Case c;
    c.node = make_node("TopK", attrs);
    c.inputs = {t, Tensor::from_vector<int64_t>(Shape{1}, {row.k})};
    c.constant = {false, true};
    c.num_outputs = 2;
    c.tolerance = {0, 0};
    cases.push_back(c);
  }
  // Selections of a large share of the axis (a sparsemax sorts whole rows): both zeros, which
  // rank alike (ties by index), infinities and NaNs, along either axis.
  for (int k = 0; k < 8; ++k) {
    const ints x = k < 4 ? ints{64, 128} : ints{40, 6};
    Tensor t = rng.tensor(x, -3, 3);
    const std::vector<float> specials = {0.f,
                                         -0.f,
                                         1.f,
                                         -1.f,
                                         std::nanf(""),
                                         std::numeric_limits<float>::infinity(),
                                         -std::numeric_limits<float>::infinity()};
    for (int64_t i = 0; i < t.size(); ++i)
      if (rng.chance(0.5)) t.data<float>()[i] = rng.pick(specials);
    const int64_t axis = k < 4 ? 1 : 0;
    const int64_t n = x[static_cast<size_t>(axis)];
    Attributes attrs{{"axis", axis}};
    if (k % 2 == 1) attrs.set("largest", int64_t{0});
    Case c;
    c.node = make_node("TopK", attrs);
    c.inputs = {t, Tensor::from_vector<int64_t>(Shape{1}, {k % 4 < 2 ? n : n / 2})};
    c.constant = {false, true};
    c.num_outputs = 2;
    c.tolerance = {0, 0};
    cases.push_back(c);
  }
  // Integer TopK (PointNet++'s ball query keeps the lowest masked indices): many ties, along
  // either axis, largest and smallest, k all or part of the axis.
  for (int k = 0; k < 8; ++k) {
    const ElementType type = k % 4 < 2 ? ElementType::i64 : ElementType::i32;
    const ints x = k < 4 ? ints{64, 100} : ints{30, 7, 5};
    Tensor t(type, Shape(x));
    for (int64_t i = 0; i < t.size(); ++i) {
      const int64_t v = rng.chance(0.3) ? 1000 : rng.integer(-20, 20);
      if (type == ElementType::i64)
        t.data<int64_t>()[i] = v;
      else
        t.data<int32_t>()[i] = static_cast<int32_t>(v);
    }
    const int64_t axis = k < 4 ? 1 : 0;
    const int64_t n = x[static_cast<size_t>(axis)];
    Attributes attrs{{"axis", axis}};
    if (k % 2 == 1) attrs.set("largest", int64_t{0});
    Case c;
    c.node = make_node("TopK", attrs);
    c.inputs = {t, Tensor::from_vector<int64_t>(Shape{1}, {k % 3 == 0 ? n : n / 3})};
    c.constant = {false, true};
    c.num_outputs = 2;
    c.tolerance = {0, 0};
    c.implementation = "dnnl:top_k_select";
    cases.push_back(c);
  }
  // Sum and Mean of 1 to 4 tensors of one shape (broadcasts are the reference's).
  for (int k = 0; k < 12; ++k) {
    const ints x = rng.dims(static_cast<size_t>(rng.integer(1, 4)), 1, 9);
    Case c;
    c.node = make_node(k % 2 ? "Mean" : "Sum");
    const int n = 1 + k % 4;
    for (int i = 0; i < n; ++i) c.inputs.push_back(rng.tensor(x, -3, 3));
    c.constant.assign(c.inputs.size(), false);
    c.tolerance = {1e-6, 1e-6};
    c.fast_implementation = true;
    cases.push_back(c);
  }
  const std::vector<TensorLayout> layouts = activation_layouts();
  for (int k = 0; k < 12; ++k) {
    const TensorLayout layout = layouts[static_cast<size_t>(k) % layouts.size()];
    const int64_t unit = layout.channel_block ? layout.channel_block : 5;
    const ints x{rng.integer(1, 2), unit * rng.integer(1, 3), rng.integer(1, 12),
                 rng.integer(1, 12)};
    Case c;
    const int64_t size = k % 4 == 3 ? rng.pick(ints{1, 3}) : 5;
    c.node = make_node("LRN", Attributes{{"size", size},
                                         {"alpha", rng.real(1e-4, 1e-2)},
                                         {"beta", 0.75},
                                         {"bias", rng.pick<double>({1.0, 2.0})}});
    c.inputs = {rng.tensor(x, -3, 3)};
    c.constant = {false};
    c.input_layouts = {layout};
    c.output_layout = layout;
    c.tolerance = {1e-5, 1e-6};
    c.fast_implementation = true;
    // oneDNN's AVX-512 JIT LRN runs each of these (plain tensors in the blocked layout); on AVX2
    // it takes few shapes, and the others are the reference's.
    c.must_accept = test::cpu_has_avx512();
    cases.push_back(c);
  }
  return cases;
}

// Where with every operand full-size, broadcast over some axes (a causal mask [1,1,T,T] over
// [B,H,T,T]) or a scalar, of f32, i64 and boolean elements: the row-wise select against the
// reference.
std::vector<Case> where_cases(Rng& rng) {
  std::vector<Case> cases;
  auto broadcast_of = [&](const ints& out) {
    if (rng.chance(0.2)) return ints{};
    ints d = out;
    for (auto& x : d)
      if (rng.chance(0.4)) x = 1;
    if (rng.chance(0.3)) d.erase(d.begin());  // fewer axes, aligned to the right
    return d;
  };
  auto random_of = [&](ElementType type, const ints& dims) {
    Tensor t(type, Shape(dims));
    for (int64_t i = 0; i < t.size(); ++i) {
      if (type == ElementType::f32) t.data<float>()[i] = static_cast<float>(rng.real(-3, 3));
      if (type == ElementType::i64) t.data<int64_t>()[i] = rng.integer(-1000, 1000);
      if (type == ElementType::boolean) t.data<bool>()[i] = rng.chance(0.5);
    }
    return t;
  };
  for (int k = 0; k < 40; ++k) {
    const ints out = rng.dims(static_cast<size_t>(rng.integer(1, 4)), 1, k % 4 == 3 ? 40 : 7);
    const ElementType type = k % 5 == 0   ? ElementType::i64
                             : k % 5 == 1 ? ElementType::boolean
                                          : ElementType::f32;
    Case c;
    c.node = make_node("Where");
    c.inputs = {random_of(ElementType::boolean, k % 3 == 0 ? out : broadcast_of(out)),
                random_of(type, k % 3 == 1 ? out : broadcast_of(out)),
                random_of(type, k % 3 == 2 ? out : broadcast_of(out))};
    c.constant = {false, rng.chance(0.3), false};
    c.tolerance = {0, 0};
    cases.push_back(c);
  }
  return cases;
}

// RNN, GRU and LSTM: both directions and bidirectional, both layouts, ragged sequence_lens,
// initial states, biases, peepholes, clip, input_forget and linear_before_reset, hidden sizes 1-40.
std::vector<Case> recurrent_cases(Rng& rng) {
  std::vector<Case> cases;
  // Cases 36-41 have more batch rows than the kernel takes a block of units at a time for (one
  // sgemm per step); 42-47 a step large enough to split its unit blocks between threads, hidden
  // sizes not a multiple of the block.
  for (int k = 0; k < 48; ++k) {
    const char* op = k % 3 == 0 ? "RNN" : k % 3 == 1 ? "GRU" : "LSTM";
    const int64_t gates = k % 3 == 0 ? 1 : k % 3 == 1 ? 3 : 4;
    const bool many_rows = k >= 36 && k < 42, split = k >= 42;
    // The last case has an empty batch.
    const int64_t seq = split ? 3 : rng.integer(1, 6), drawn_batch = many_rows ? rng.integer(5, 6)
                                                                     : split   ? rng.integer(1, 2)
                                                                               : rng.integer(1, 4);
    const int64_t batch = k == 47 ? 0 : drawn_batch;
    // Every fourth case is wider than a vector of the gate arithmetic, with a tail.
    const int64_t input = rng.integer(1, 9), hidden = split        ? (gates == 1 ? 264 : 150)
                                                      : k % 4 == 3 ? rng.integer(17, 40)
                                                                   : rng.integer(1, 9);
    const char* direction = (k / 3) % 3 == 0   ? "forward"
                            : (k / 3) % 3 == 1 ? "reverse"
                                               : "bidirectional";
    const int64_t dirs = (k / 3) % 3 == 2 ? 2 : 1;
    const bool batch_major = rng.chance(0.3);
    // R as torch initializes it for wide layers (+-1/sqrt(hidden)): with +-1, a step multiplies
    // rounding differences by R's norm (~9 at 264 units), and summation order alone decides.
    const double r_bound = split ? 1.5 / std::sqrt(static_cast<double>(hidden)) : 1.0;
    Attributes attrs;
    attrs.set("hidden_size", hidden);
    attrs.set("direction", std::string(direction));
    if (batch_major) attrs.set("layout", int64_t{1});
    if (rng.chance(0.3)) attrs.set("clip", rng.real(0.5, 3.0));
    // Of the two GRUs split between threads, one applies R_h before the reset gate, one after.
    if (gates == 3 && (split ? k == 46 : rng.chance(0.5)))
      attrs.set("linear_before_reset", int64_t{1});
    if (gates == 4 && rng.chance(0.2)) attrs.set("input_forget", int64_t{1});
    Case c;
    c.node = make_node(op, attrs, gates == 4 ? 3 : 2);
    const ints x = batch_major ? ints{batch, seq, input} : ints{seq, batch, input};
    const ints state = batch_major ? ints{batch, dirs, hidden} : ints{dirs, batch, hidden};
    c.inputs = {rng.tensor(x, -2, 2), rng.tensor({dirs, gates * hidden, input}, -1, 1),
                rng.tensor({dirs, gates * hidden, hidden}, -r_bound, r_bound)};
    c.inputs.push_back(rng.chance(0.7) ? rng.tensor({dirs, 2 * gates * hidden}, -1, 1) : Tensor());
    if (rng.chance(0.4)) {
      std::vector<int32_t> lengths;
      for (int64_t b = 0; b < batch; ++b)
        lengths.push_back(static_cast<int32_t>(rng.integer(0, seq)));
      c.inputs.push_back(Tensor::from_vector<int32_t>(Shape{batch}, lengths));
    } else {
      c.inputs.push_back(Tensor());
    }
    c.inputs.push_back(rng.chance(0.5) ? rng.tensor(state, -1, 1) : Tensor());
    if (gates == 4) {
      c.inputs.push_back(rng.chance(0.5) ? rng.tensor(state, -1, 1) : Tensor());
      c.inputs.push_back(rng.chance(0.4) ? rng.tensor({dirs, 3 * hidden}, -1, 1) : Tensor());
    }
    while (!c.inputs.empty() && c.inputs.back().empty()) c.inputs.pop_back();
    c.constant.assign(c.inputs.size(), false);
    for (size_t i = 1; i < c.inputs.size() && i < 4; ++i) c.constant[i] = true;
    // R computed by the model: packed on every run rather than once.
    if (k % 5 == 4) c.constant[2] = false;
    c.num_outputs = gates == 4 ? 3 : 2;
    c.tolerance = {1e-4, 1e-5};
    cases.push_back(c);
  }
  return cases;
}

// GridSample: bilinear and nearest, every padding mode, with and without align_corners; grids
// reaching past the map (and a NaN), maps of one channel and many (RAFT's correlation lookup is
// thousands of one-channel maps), large enough to run on several threads.
std::vector<Case> grid_sample_cases(Rng& rng) {
  std::vector<Case> cases;
  const char* paddings[] = {"zeros", "border", "reflection"};
  for (int k = 0; k < 36; ++k) {
    Attributes attrs;
    attrs.set("mode", std::string(k % 2 ? "nearest" : "bilinear"));
    attrs.set("padding_mode", std::string(paddings[(k / 2) % 3]));
    if ((k / 6) % 2) attrs.set("align_corners", int64_t{1});
    const bool large = k % 6 == 5;
    const int64_t n = large ? 300 : rng.integer(1, 3), ch = large ? 1 : rng.integer(1, 9);
    const int64_t h = rng.integer(1, 12), w = rng.integer(1, 12);
    const int64_t oh = large ? 7 : rng.integer(1, 9), ow = large ? 7 : rng.integer(1, 9);
    Tensor grid = rng.tensor({n, oh, ow, 2}, -1.3, 1.3);
    if (k == 6 || k == 7) grid.data<float>()[3] = std::nanf("");
    Case c;
    c.node = make_node("GridSample", attrs);
    c.inputs = {rng.tensor({n, ch, h, w}, -2, 2), grid};
    c.constant = {false, false};
    c.tolerance = {1e-5, 1e-6};
    c.implementation = "dnnl:grid_sample";
    cases.push_back(c);
  }
  return cases;
}

// RoiAlign: boxes inside, across and outside the maps, inverted, tiny and huge (their adaptive
// grids capped), several images, both modes, both coordinate conventions, fixed and adaptive
// sampling; one Faster R-CNN-sized case (100 boxes, 256 channels).
std::vector<Case> roi_align_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 32; ++k) {
    Attributes attrs;
    if (k % 2) attrs.set("mode", std::string("max"));
    if ((k / 2) % 2) attrs.set("coordinate_transformation_mode", std::string("output_half_pixel"));
    if ((k / 4) % 2) attrs.set("sampling_ratio", int64_t{2});
    const bool large = k % 8 == 7;
    const int64_t n = large ? 1 : rng.integer(1, 3), ch = large ? 256 : rng.integer(1, 20);
    const int64_t h = large ? 50 : rng.integer(1, 14), w = large ? 68 : rng.integer(1, 14);
    const double scale = large ? 0.0625 : (rng.chance(0.5) ? 1.0 : 0.5);
    attrs.set("spatial_scale", scale);
    attrs.set("output_height", large ? int64_t{7} : rng.integer(1, 5));
    attrs.set("output_width", large ? int64_t{7} : rng.integer(1, 5));
    const int64_t rois = large ? 100 : rng.integer(1, 12);
    Tensor boxes(ElementType::f32, {rois, 4});
    Tensor indices(ElementType::i64, {rois});
    const double extent_h = static_cast<double>(h) / scale,
                 extent_w = static_cast<double>(w) / scale;
    for (int64_t r = 0; r < rois; ++r) {
      float* b = boxes.data<float>() + r * 4;
      const double x1 = rng.real(-0.3 * extent_w, 1.1 * extent_w);
      const double y1 = rng.real(-0.3 * extent_h, 1.1 * extent_h);
      const double bw = rng.real(-0.1, 0.7) * extent_w, bh = rng.real(-0.1, 0.7) * extent_h;
      b[0] = static_cast<float>(x1);
      b[1] = static_cast<float>(y1);
      b[2] = static_cast<float>(x1 + bw);
      b[3] = static_cast<float>(y1 + bh);
      if (k == 3 && r == 0) b[2] = b[3] = 1e4f;  // a huge box: an adaptive grid of 1024 a side
      indices.data<int64_t>()[r] = rng.integer(0, n - 1);
    }
    Case c;
    c.node = make_node("RoiAlign", attrs);
    c.inputs = {rng.tensor({n, ch, h, w}, -2, 2), boxes, indices};
    c.constant = {false, false, false};
    c.tolerance = {1e-5, 1e-5};
    c.implementation = "dnnl:roi_align";
    cases.push_back(c);
  }
  return cases;
}

// Fused attention (engine/ops/attention.hpp): batch ranks 0-2 with broadcasting between Q, Kt
// and V, operands stored transposed (every permutation that keeps the axis the kernel reads in
// place contiguous), masks of every broadcast shape (some with -inf and -1e9 entries), and
// sizes from 1 to rows spanning several of the kernel's row blocks (N = 700).
std::vector<Case> attention_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 40; ++k) {
    const size_t batch_rank = static_cast<size_t>(k % 3);
    const ints batch = rng.dims(batch_rank, 1, 3);
    const bool large = k % 10 == 9;
    const int64_t m = large ? 150 : rng.integer(1, 20), kk = rng.integer(1, 24);
    const int64_t n = large ? 700 : rng.integer(1, 40), d = rng.integer(1, 20);
    // An operand's batch dims: all of them, some broadcast (1), or fewer leading ones.
    auto batch_of = [&]() {
      ints dims = batch;
      for (int64_t& dim : dims)
        if (rng.chance(0.25)) dim = 1;
      if (!dims.empty() && rng.chance(0.25)) dims.erase(dims.begin());
      return dims;
    };
    Attributes attrs;
    attrs.set("scale", rng.real(0.1, 1.0));
    Case c;
    const char* perm_names[3] = {"q_perm", "k_perm", "v_perm"};
    ints scores;  // the broadcast batch dims, then M and N
    for (int o = 0; o < 3; ++o) {
      ints logical = batch_of();
      if (logical.size() > scores.size())
        scores.insert(scores.begin(), logical.size() - scores.size(), 1);
      for (size_t i = 0; i < logical.size(); ++i) {
        int64_t& dim = scores[scores.size() - logical.size() + i];
        dim = std::max(dim, logical[i]);
      }
      logical.push_back(o == 0 ? m : o == 1 ? kk : n);
      logical.push_back(o == 0 ? kk : o == 1 ? n : d);
      const size_t rank = logical.size();
      ints stored = logical;
      if (rng.chance(0.6)) {
        // A permutation keeping a contiguous axis: the stored last axis is the operand's last
        // one (or, for Kt, its second to last).
        ints perm(rank);
        for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
        std::shuffle(perm.begin(), perm.end() - 1, std::mt19937(static_cast<unsigned>(k * 3 + o)));
        if (o == 1 && rng.chance(0.5)) std::swap(perm[rank - 1], perm[rank - 2]);
        for (size_t i = 0; i < rank; ++i) stored[static_cast<size_t>(perm[i])] = logical[i];
        attrs.set(perm_names[o], perm);
      }
      c.inputs.push_back(rng.tensor(stored, -1.5, 1.5));
    }
    if (k % 4 != 0) {
      scores.push_back(m);
      scores.push_back(n);
      ints mask = scores;
      for (int64_t& dim : mask)
        if (rng.chance(0.4)) dim = 1;
      while (!mask.empty() && rng.chance(0.3)) mask.erase(mask.begin());
      Tensor values = rng.tensor(mask, -2, 2);
      // Masked-out keys, never a whole row: only where the mask varies along N.
      if (!mask.empty() && mask.back() == n && n > 1)
        for (int64_t i = 0; i < values.size(); ++i)
          if (i % n != 0 && rng.chance(0.2))
            values.data<float>()[i] = k % 2 ? -std::numeric_limits<float>::infinity() : -1e9f;
      c.inputs.push_back(values);
    }
    // The output stored transposed (its rows kept contiguous), where Y has batch dims.
    const size_t rank = (k % 4 != 0 ? scores.size() - 2 : scores.size()) + 2;  // Y's
    if (rank > 2 && rng.chance(0.5)) {
      ints perm(rank);
      for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
      std::shuffle(perm.begin(), perm.end() - 1, std::mt19937(static_cast<unsigned>(k)));
      attrs.set("y_perm", perm);
    }
    c.node = make_node("ScaledDotProductAttention", attrs);
    c.constant.assign(c.inputs.size(), false);
    c.tolerance = {1e-4, 1e-5};
    c.implementation = "dnnl:attention_sgemm";
    cases.push_back(c);
  }
  return cases;
}

// ScatterElements and Scatter: ranks 1-4, every axis (negative ones too), indices smaller than
// the data in the other dimensions, negative and repeated indices (reduction none keeps the last
// in index order), every reduction, i32 and i64 indices; some cases large enough to run on
// several threads, splitting rows (axis > 0) or columns (axis 0). Bit-exact.
std::vector<Case> scatter_elements_cases(Rng& rng) {
  std::vector<Case> cases;
  const char* reductions[] = {"none", "add", "mul", "max", "min"};
  for (int k = 0; k < 40; ++k) {
    const bool large = k % 8 == 7;
    const size_t rank = large ? 2 : static_cast<size_t>(rng.integer(1, 4));
    ints data = large ? ints{rng.integer(50, 300), rng.integer(64, 200)} : rng.dims(rank, 1, 6);
    const auto axis = static_cast<size_t>(rng.integer(0, static_cast<int64_t>(rank) - 1));
    ints index = data;
    for (size_t d = 0; d < rank; ++d)
      index[d] = d == axis ? (large ? 300 : rng.integer(1, 8)) : rng.integer(1, data[d]);
    int64_t count = 1;
    for (int64_t dim : index) count *= dim;
    std::vector<int64_t> values(static_cast<size_t>(count));
    for (int64_t& v : values) {
      v = rng.integer(0, data[axis] - 1);
      if (rng.chance(0.3)) v -= data[axis];  // the same element, counted from the end
    }
    Attributes attrs;
    attrs.set("axis", static_cast<int64_t>(axis) - (k % 3 == 0 ? static_cast<int64_t>(rank) : 0));
    const bool legacy = k % 10 == 4;  // opset 9's Scatter: no reduction
    if (!legacy) attrs.set("reduction", std::string(reductions[k % 5]));
    Case c;
    c.node = make_node(legacy ? "Scatter" : "ScatterElements", attrs);
    Tensor indices = Tensor::from_vector<int64_t>(Shape(index), values);
    if (k % 4 == 1) {
      std::vector<int32_t> narrow(values.begin(), values.end());
      indices = Tensor::from_vector<int32_t>(Shape(index), narrow);
    }
    c.inputs = {rng.tensor(data, -2, 2), indices, rng.tensor(index, -2, 2)};
    c.constant = {false, false, false};
    c.tolerance = {0, 0};
    c.implementation = "dnnl:scatter_rows";
    cases.push_back(c);
  }
  return cases;
}

// ScatterND: data of ranks 1-4, tuples of every length k (whole rows to single elements) in index
// tensors of rank 2-3, negative and repeated tuples (reduction none keeps the last in index
// order), every reduction; some cases large enough to split the slices' columns over threads.
// Bit-exact.
std::vector<Case> scatter_nd_cases(Rng& rng) {
  std::vector<Case> cases;
  const char* reductions[] = {"none", "add", "mul", "max", "min"};
  for (int k = 0; k < 30; ++k) {
    const bool large = k % 6 == 5;
    const size_t rank = large ? 2 : static_cast<size_t>(rng.integer(1, 4));
    const ints data =
        large ? ints{rng.integer(50, 300), rng.integer(100, 700)} : rng.dims(rank, 1, 6);
    const auto depth =
        large ? size_t{1} : static_cast<size_t>(rng.integer(1, static_cast<int64_t>(rank)));
    ints index = k % 3 == 0 ? ints{rng.integer(1, 4), rng.integer(1, 5)}
                            : ints{large ? 400 : rng.integer(1, 9)};
    ints updates = index;
    index.push_back(static_cast<int64_t>(depth));
    updates.insert(updates.end(), data.begin() + static_cast<std::ptrdiff_t>(depth), data.end());
    int64_t count = 1;
    for (int64_t dim : index) count *= dim;
    std::vector<int64_t> values(static_cast<size_t>(count));
    for (size_t i = 0; i < values.size(); ++i) {
      const int64_t extent = data[i % depth];
      values[i] = rng.integer(0, extent - 1);
      if (rng.chance(0.3)) values[i] -= extent;  // the same slice, counted from the end
    }
    Attributes attrs;
    if (k % 7 != 3) attrs.set("reduction", std::string(reductions[k % 5]));
    Case c;
    c.node = make_node("ScatterND", attrs);
    c.inputs = {rng.tensor(data, -2, 2), Tensor::from_vector<int64_t>(Shape(index), values),
                rng.tensor(updates, -2, 2)};
    c.constant = {false, false, false};
    c.tolerance = {0, 0};
    c.implementation = "dnnl:scatter_slices";
    cases.push_back(c);
  }
  return cases;
}

// A Gather's table as the cases' k picks its type: f32, or (k % 5 being 1 or 2) the same values
// as whole numbers in i64 or u8 (a shape, a vocabulary of ids).
Tensor gather_table(const Tensor& table, int k) {
  if (k % 5 != 1 && k % 5 != 2) return table;
  const ElementType type = k % 5 == 1 ? ElementType::i64 : ElementType::u8;
  Tensor ints_table(type, table.shape());
  for (int64_t i = 0; i < table.size(); ++i) {
    const auto v = static_cast<int64_t>(std::lround(table.data<float>()[i] * 10 + 40));
    if (type == ElementType::i64)
      ints_table.data<int64_t>()[i] = v;
    else
      ints_table.data<uint8_t>()[i] = static_cast<uint8_t>(v);
  }
  return ints_table;
}

// Gather indices of shape `index` into an axis of `extent`, negative ones counting from the end,
// repeated; i64, or i32 where k % 4 == 3.
Tensor gather_indices(Rng& rng, const ints& index, int64_t extent, int k) {
  int64_t count = 1;
  for (int64_t dim : index) count *= dim;
  std::vector<int64_t> values(static_cast<size_t>(count));
  for (int64_t& v : values) v = rng.integer(-extent, extent - 1);
  if (k % 4 != 3) return Tensor::from_vector<int64_t>(Shape(index), values);
  return Tensor::from_vector<int32_t>(Shape(index),
                                      std::vector<int32_t>(values.begin(), values.end()));
}

// GatherElements: f32, i64 and u8 data of ranks 1-4, every axis (negative ones too), indices
// smaller than the data in the other dimensions and of any length along the axis (negative ones
// counting from the end, repeated), i64 and i32; some large enough to gather on several threads,
// along the last axis (DeBERTa's relative positions) and the first. Exact.
std::vector<Case> gather_elements_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 36; ++k) {
    const bool large = k % 6 == 5;
    const size_t rank = large ? 3 : static_cast<size_t>(rng.integer(1, 4));
    const ints data = large ? ints{rng.integer(4, 12), rng.integer(30, 90), rng.integer(40, 120)}
                            : rng.dims(rank, 1, 6);
    const auto axis = static_cast<size_t>(large ? (k % 12 == 5 ? 2 : 0)
                                                : rng.integer(0, static_cast<int64_t>(rank) - 1));
    ints index = data;
    for (size_t d = 0; d < rank; ++d)
      index[d] = d == axis ? (large ? rng.integer(60, 130) : rng.integer(1, 8))
                           : (large ? data[d] : rng.integer(1, data[d]));
    Attributes attrs;
    attrs.set("axis", static_cast<int64_t>(axis) - (k % 4 == 0 ? static_cast<int64_t>(rank) : 0));
    Case c;
    c.node = make_node("GatherElements", attrs);
    const Tensor table = gather_table(rng.tensor(data, -3, 3), k);
    const Tensor indices = gather_indices(rng, index, data[axis], k);
    c.inputs = {table, indices};
    c.constant = {false, false};
    c.tolerance = {0, 0};
    c.implementation = "dnnl:gather_elements_rows";
    cases.push_back(c);
  }
  return cases;
}

// Gather: f32, i64 and u8 data of ranks 1-4, every axis (negative ones too), indices of rank 0-2
// (i64 and i32, negative ones counting from the end, repeated), embedding-sized tables large
// enough to copy on several threads, and large gathers of single elements along the last axis
// (an unfold's columns), also on several threads. Exact.
std::vector<Case> gather_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 36; ++k) {
    const bool large = k % 6 == 5;
    const bool columns = large && k % 12 == 11;
    const size_t rank = large ? (columns ? 3 : 2) : static_cast<size_t>(rng.integer(1, 4));
    const ints data = columns ? ints{rng.integer(20, 60), 7, rng.integer(30, 50)}
                      : large ? ints{rng.integer(500, 3000), 64}
                              : rng.dims(rank, 1, 6);
    const auto axis = static_cast<size_t>(columns ? 2
                                          : large ? 0
                                                  : rng.integer(0, static_cast<int64_t>(rank) - 1));
    const ints index = columns ? ints{7, rng.integer(20, 40)}
                       : large ? ints{rng.integer(100, 400)}
                               : rng.dims(static_cast<size_t>(k % 3), 1, 4);
    Attributes attrs;
    attrs.set("axis", static_cast<int64_t>(axis) - (k % 4 == 0 ? static_cast<int64_t>(rank) : 0));
    Case c;
    c.node = make_node("Gather", attrs);
    const Tensor table = gather_table(rng.tensor(data, -3, 3), k);
    const Tensor indices = gather_indices(rng, index, data[axis], k);
    c.inputs = {table, indices};
    c.constant = {k % 2 == 0, false};
    c.tolerance = {0, 0};
    c.implementation = "dnnl:gather_rows";
    cases.push_back(c);
  }
  return cases;
}

// Sin and Cos: arguments near 0 (where ONNX's absolute tolerance is tight), around multiples of
// pi/2 (the argument reduction's hard cases), up to 1e5 (NeRF's high frequencies) and beyond
// 2^20, infinities and NaN (libm's path); tensors up to 2^17 elements, several threads' worth.
std::vector<Case> trigonometric_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 24; ++k) {
    const ints dims =
        k % 6 == 5 ? ints{2, 65536} : rng.dims(static_cast<size_t>(rng.integer(0, 3)), 1, 40);
    const double range = k % 4 == 0 ? 1e-3 : k % 4 == 1 ? 10 : k % 4 == 2 ? 1e5 : 1e7;
    Tensor x = rng.tensor(dims, -range, range);
    float* p = x.data<float>();
    for (int64_t i = 0; i < x.size(); ++i) {
      if (k % 3 == 0 && i % 7 == 0)  // next to a multiple of pi/2
        p[i] = static_cast<float>(std::round(p[i] / 1.5707963267948966) * 1.5707963267948966);
      if (k == 11 && i < 3)
        p[i] = i == 0 ? std::numeric_limits<float>::infinity() : i == 1 ? std::nanf("") : -0.0f;
    }
    Case c;
    c.node = make_node(k % 2 ? "Cos" : "Sin");
    c.inputs = {x};
    c.constant = {false};
    // The reference computes in double and rounds: the kernel must land on the same float or
    // the next one.
    c.tolerance = {2.4e-7, 1e-30};
    c.implementation = "dnnl:trigonometric";
    cases.push_back(c);
  }
  return cases;
}

// The recurrent nodes oneDNN's RNN primitives run (recurrent_primitive.cpp): default activations,
// no clip, peepholes or sequence_lens, constant weights; every cell, direction and layout, with
// and without initial states and biases, sequences up to 70 steps, hidden sizes 1-70, in f32
// and bf16. With bf16 instructions, LSTM and RNN of a bf16 model must run on the primitive in
// bf16; everything else on troupe's f32 sgemm kernel (saying so in a bf16 model): f32 models,
// GRU (which oneDNN 2.6 answers with its reference RNN) and CPUs without bf16.
std::vector<Case> recurrent_primitive_cases(Rng& rng) {
  std::vector<Case> cases;
  const bool native_bf16 = kernels::effective_cpu_isa().bf16;
  for (int k = 0; k < 48; ++k) {
    const int cell = k % 4;  // RNN, GRU, GRU with linear_before_reset, LSTM
    const char* op = cell == 0 ? "RNN" : cell == 3 ? "LSTM" : "GRU";
    const int64_t gates = cell == 0 ? 1 : cell == 3 ? 4 : 3;
    const int64_t seq = k % 8 == 7 ? 70 : rng.integer(1, 6), batch = rng.integer(1, 4);
    const int64_t input = rng.integer(1, 20),
                  hidden = k % 5 == 4 ? rng.integer(33, 70) : rng.integer(1, 20);
    const int64_t dirs = (k / 4) % 3 == 2 ? 2 : 1;
    const char* direction = (k / 4) % 3 == 0 ? "forward" : dirs == 2 ? "bidirectional" : "reverse";
    const bool batch_major = (k / 12) % 2 == 1;
    Attributes attrs;
    attrs.set("hidden_size", hidden);
    attrs.set("direction", std::string(direction));
    if (batch_major) attrs.set("layout", int64_t{1});
    if (cell == 2) attrs.set("linear_before_reset", int64_t{1});
    Case c;
    c.node = make_node(op, attrs, gates == 4 ? 3 : 2);
    const ints x = batch_major ? ints{batch, seq, input} : ints{seq, batch, input};
    const ints state = batch_major ? ints{batch, dirs, hidden} : ints{dirs, batch, hidden};
    c.inputs = {rng.tensor(x, -2, 2), rng.tensor({dirs, gates * hidden, input}, -0.5, 0.5),
                rng.tensor({dirs, gates * hidden, hidden}, -0.5, 0.5)};
    c.inputs.push_back(rng.chance(0.7) ? rng.tensor({dirs, 2 * gates * hidden}, -1, 1) : Tensor());
    c.inputs.push_back(Tensor());  // sequence_lens
    c.inputs.push_back(rng.chance(0.5) ? rng.tensor(state, -1, 1) : Tensor());
    if (gates == 4) c.inputs.push_back(rng.chance(0.5) ? rng.tensor(state, -1, 1) : Tensor());
    while (!c.inputs.empty() && c.inputs.back().empty()) c.inputs.pop_back();
    c.constant.assign(c.inputs.size(), false);
    for (size_t i = 1; i < c.inputs.size() && i < 4; ++i) c.constant[i] = true;
    c.num_outputs = gates == 4 ? 3 : 2;
    c.tolerance = {1e-4, 1e-5};
    c.implementation_part = "recurrent_steps";
    if (k % 3 != 0) {
      // bf16 rounds every step's products: held to the reference on bf16-rounded inputs, with
      // the tolerance of bf16's 8 bits over a few steps' sums.
      c.precision = ElementType::bf16;
      c.tolerance = {3e-2, 3e-2};
      if (native_bf16 && gates != 3) c.implementation_part = "brgemm/bf16";
    }
    cases.push_back(c);
  }
  return cases;
}

void run_family(const std::string& title, const std::vector<Case>& cases) {
  Tally tally;
  for (const Case& c : cases) check_case(c, tally);
  tally.print(title);
  // Every op of the family must have run on the dnnl backend at least once.
  for (const Case& c : cases)
    EXPECT_GT(tally.ran[c.node.op_type], 0) << c.node.op_type << " never ran on dnnl";
}

TEST(BackendConsistency, Eltwise) {
  Rng rng(base_seed() + 1);
  run_family("eltwise", unary_cases(rng));
}

TEST(BackendConsistency, Binary) {
  Rng rng(base_seed() + 2);
  run_family("binary", binary_cases(rng));
}

TEST(BackendConsistency, Softmax) {
  Rng rng(base_seed() + 3);
  run_family("softmax", softmax_cases(rng));
}

TEST(BackendConsistency, SoftmaxAlongAnInnerAxisRunsTheStridedLoop) {
  Rng rng(base_seed() + 73);
  run_family("strided softmax", strided_softmax_cases(rng));
}

TEST(BackendConsistency, SoftmaxOfShortRowsRunsTheTransposedBlocks) {
  Rng rng(base_seed() + 97);
  run_family("short-row softmax", short_rows_softmax_cases(rng));
}

TEST(BackendConsistency, LaidOutGlobalPoolingRunsTheLaneLoop) {
  Rng rng(base_seed() + 98);
  run_family("laid-out global pooling", laid_out_global_pooling_cases(rng));
}

TEST(BackendConsistency, MatMulAndGemm) {
  Rng rng(base_seed() + 4);
  run_family("matmul", matmul_cases(rng));
}

// MatMul reading its B transposed ("fused_transpose_b", B stored [.., N, K]): 2-D, batched (3-D
// and 4-D, as an attention's K^T), a shared B, a fused bias, in f32 and in bf16; never oneDNN's
// reference kernel (where it has one only for that order, the kernel copies B row-major).
std::vector<Case> transposed_b_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 24; ++k) {
    const int64_t m = rng.integer(1, 40), n = rng.integer(1, 40), kk = rng.integer(1, 70);
    ints a{m, kk}, b{n, kk};
    const int shape_kind = k % 3;
    if (shape_kind == 1) {  // same batch on both sides
      const ints batch = rng.dims(static_cast<size_t>(rng.integer(1, 2)), 1, 4);
      a.insert(a.begin(), batch.begin(), batch.end());
      b.insert(b.begin(), batch.begin(), batch.end());
    } else if (shape_kind == 2) {  // batch on the left, shared B
      a.insert(a.begin(), rng.integer(2, 3));
    }
    Attributes attrs{{"fused_transpose_b", int64_t{1}}};
    const bool bias = rng.chance(0.3);
    if (bias) attrs.set("fused_bias", int64_t{1});
    Case c;
    c.node = make_node("MatMul", attrs);
    c.inputs = {rng.tensor(a), rng.tensor(b)};
    if (bias) c.inputs.push_back(rng.tensor({n}));
    c.constant.assign(c.inputs.size(), false);
    if (bias) c.constant[2] = true;
    c.tolerance = {1e-4, 2e-6 * static_cast<double>(kk)};
    c.fast_implementation = true;
    if (k % 4 == 3) {
      c.precision = ElementType::bf16;
      c.tolerance = {2e-4, 5e-5 + 2e-6 * static_cast<double>(kk)};
    }
    cases.push_back(c);
  }
  return cases;
}

TEST(BackendConsistency, MatMulReadsATransposedB) {
  Rng rng(base_seed() + 74);
  std::vector<Case> cases = transposed_b_cases(rng);
  // bf16 runs only on AVX-512 CPUs (natively or emulated).
  if (!test::cpu_has_avx512())
    cases.erase(std::remove_if(cases.begin(), cases.end(),
                               [](const Case& c) { return c.precision == ElementType::bf16; }),
                cases.end());
  run_family("transposed B (" + test::effective_isa_name() + ")", cases);
}

TEST(BackendConsistency, Conv) {
  Rng rng(base_seed() + 5);
  run_family("conv", conv_cases(rng));
}

TEST(BackendConsistency, ConvShapesLayoutsAndPostOps) {
  Rng rng(base_seed() + 6);
  run_family("conv sweep (" + test::effective_isa_name() + ")", conv_sweep_cases(rng));
}

// 1x1 convolutions on plain tensors of 64 pixels or more and 16 channels or more in and out, run
// as one matmul of the weights and each image (kernels/dnnl/conv.cpp, uses_pointwise_product): 1-D
// to 3-D, batches of 1 to 3, with and without bias, a residual sum, an activation, both, and
// weights given at run time.
std::vector<Case> pointwise_product_cases(Rng& rng) {
  const std::vector<std::string> activations = {"", "Relu", "Swish", "Clip"};
  std::vector<Case> cases;
  for (int k = 0; k < 16; ++k) {
    const size_t spatial = k % 4 == 3 ? 1 : k % 4 == 2 ? 3 : 2;
    const int64_t batch = rng.integer(1, 3), in = rng.integer(16, 70), out = rng.integer(16, 200);
    ints x{batch, in}, w{out, in};
    int64_t pixels = 1;
    for (size_t i = 0; i < spatial; ++i) {
      x.push_back(spatial == 1 ? rng.integer(64, 300) : rng.integer(4, 20));
      w.push_back(1);
      pixels *= x.back();
    }
    if (pixels < 64) x.back() *= (64 + pixels - 1) / pixels;
    Attributes attrs;
    const std::string activation = activations[static_cast<size_t>(k) % activations.size()];
    if (!activation.empty()) attrs.set("fused_activation", activation);
    if (activation == "Clip") {
      attrs.set("fused_activation_alpha", 0.0);
      attrs.set("fused_activation_beta", 6.0);
    }
    if (activation == "Swish") attrs.set("fused_activation_alpha", 1.0);
    Case c;
    c.node = make_node("Conv", attrs);
    c.inputs = {rng.tensor(x), rng.tensor(w, -0.5, 0.5), k % 3 == 1 ? Tensor() : rng.tensor({out})};
    c.constant = {false, k % 5 != 4, true};
    if (k % 4 == 1) add_fused_sum(c, TensorLayout{}, rng);
    c.tolerance = {1e-4, 2e-6 * static_cast<double>(in)};
    // oneDNN 2.6's AVX2 matmul answers a bias and a residual sum together with its reference
    // kernel: the convolution's own kernels take those.
    const bool sum_and_bias = k % 4 == 1 && !c.inputs[2].empty();
    if (kernels::effective_cpu_isa().avx512 || !sum_and_bias)
      c.implementation_part = "pointwise_matmul";
    cases.push_back(c);
  }
  return cases;
}

TEST(BackendConsistency, PointwiseConvolutionsAsOneProduct) {
  Rng rng(base_seed() + 51);
  run_family("pointwise product (" + test::effective_isa_name() + ")",
             pointwise_product_cases(rng));
}

TEST(BackendConsistency, DepthwiseConvolutionsOneDnnRunsAsAGemm) {
  Rng rng(base_seed() + 90);
  run_family("depthwise rows (" + test::effective_isa_name() + ")", depthwise_rows_cases(rng));
}

TEST(BackendConsistency, MaxPoolIndicesAndMaxUnpool) {
  Rng rng(base_seed() + 91);
  run_family("max pool indices", max_pool_indices_cases(rng));
}

// An index outside the unpooled tensor (past its end, negative) is named as the reference kernel
// names it, not written somewhere: troupe's loops leave such indices to it.
TEST(BackendConsistency, MaxUnpoolNamesAnIndexOutsideItsTensor) {
  const Tensor x = Tensor::from_vector<float>(Shape{1, 1, 2, 2}, {1, 2, 3, 4});
  const Node node =
      make_node("MaxUnpool", Attributes{{"kernel_shape", ints{2, 2}}, {"strides", ints{2, 2}}});
  for (int64_t bad : {int64_t{16}, int64_t{-1}}) {
    const Tensor indices = Tensor::from_vector<int64_t>(Shape{1, 1, 2, 2}, {0, 3, 9, bad});
    const std::vector<ValueInfo> in = value_infos({x, indices}, "x");
    const std::vector<ValueInfo> out = {ValueInfo{"y", ElementType::f32, Shape{1, 1, 4, 4}}};
    const std::unique_ptr<Kernel> kernel =
        KernelRegistry::instance().create_with("dnnl", KernelRequest{node, in, out});
    ASSERT_TRUE(kernel);
    EXPECT_EQ(kernel->implementation(), "dnnl:max_unpool");
    std::vector<Tensor> y = {Tensor(ElementType::f32, Shape{1, 1, 4, 4})};
    try {
      kernel->execute({x, indices}, y);
      ADD_FAILURE() << "index " << bad << " was accepted";
    } catch (const ExecutionError& e) {
      EXPECT_NE(std::string(e.what()).find("index " + std::to_string(bad)), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("MaxUnpool node"), std::string::npos) << e.what();
    }
  }
}

TEST(BackendConsistency, TheDepthwiseLoopsAreASwitch) {
  Rng rng(base_seed() + 92);
  std::vector<Tensor> inputs = {rng.tensor({1, 8, 60}), rng.tensor({8, 1, 33})};
  const std::vector<ValueInfo> infos = value_infos(inputs, "x");
  Case c;
  c.node = make_node("Conv", Attributes{{"group", int64_t{8}}, {"pads", ints{16, 16}}});
  c.inputs = inputs;
  const std::vector<ValueInfo> outputs = infer_outputs(c, infos, {nullptr, &inputs[1]});
  const KernelRequest request{c.node, infos, outputs, {nullptr, &inputs[1]}};
  {
    const std::unique_ptr<Kernel> kernel = KernelRegistry::instance().create_with("dnnl", request);
    ASSERT_TRUE(kernel);
    EXPECT_EQ(kernel->implementation(), "dnnl:depthwise_rows");
  }
  {
    const test::ScopedEnv off("TROUPE_DEPTHWISE_ROWS", "0");
    const std::unique_ptr<Kernel> kernel = KernelRegistry::instance().create_with("dnnl", request);
    ASSERT_TRUE(kernel);
    EXPECT_EQ(kernel->implementation().find("depthwise_rows"), std::string::npos);
  }
  // Read for every convolution (a dense one here), whatever oneDNN would run it with.
  std::vector<Tensor> dense = {rng.tensor({1, 8, 60}), rng.tensor({4, 8, 3})};
  const std::vector<ValueInfo> dense_infos = value_infos(dense, "x");
  Case d;
  d.node = make_node("Conv");
  d.inputs = dense;
  const std::vector<ValueInfo> dense_outputs = infer_outputs(d, dense_infos, {nullptr, &dense[1]});
  const test::ScopedEnv malformed("TROUPE_DEPTHWISE_ROWS", "maybe");
  try {
    KernelRegistry::instance().create_with(
        "dnnl", KernelRequest{d.node, dense_infos, dense_outputs, {nullptr, &dense[1]}});
    ADD_FAILURE() << "a malformed TROUPE_DEPTHWISE_ROWS was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("TROUPE_DEPTHWISE_ROWS='maybe'"), std::string::npos)
        << e.what();
  }
}

TEST(BackendConsistency, WinogradConvolutions) {
  Rng rng(base_seed() + 33);
  run_family("winograd (" + test::effective_isa_name() + ")", winograd_cases(rng));
}

TEST(BackendConsistency, ConvolutionsToFewChannels) {
  Rng rng(base_seed() + 93);
  run_family("narrow convolutions (" + test::effective_isa_name() + ")", narrow_conv_cases(rng));
}

TEST(BackendConsistency, ConvTranspose) {
  Rng rng(base_seed() + 34);
  run_family("conv transpose (" + test::effective_isa_name() + ")", conv_transpose_cases(rng));
}

TEST(BackendConsistency, PoolingInActivationLayouts) {
  Rng rng(base_seed() + 7);
  run_family("pooling layouts (" + test::effective_isa_name() + ")", pooling_layout_cases(rng));
}

TEST(BackendConsistency, ActivationsAndBatchNormInActivationLayouts) {
  Rng rng(base_seed() + 32);
  run_family("activation layouts (" + test::effective_isa_name() + ")",
             activation_layout_cases(rng));
}

TEST(BackendConsistency, InstanceNormalization) {
  Rng rng(base_seed() + 38);
  run_family("instance norm (" + test::effective_isa_name() + ")", instance_norm_cases(rng));
}

TEST(BackendConsistency, PRelu) {
  Rng rng(base_seed() + 37);
  run_family("prelu (" + test::effective_isa_name() + ")", prelu_cases(rng));
}

TEST(BackendConsistency, ExpandTileDepthToSpaceSpaceToDepth) {
  Rng rng(base_seed() + 40);
  run_family("rearrangements", rearrangement_cases(rng));
}

TEST(BackendConsistency, RowReductionsArgExtremaAndLrn) {
  Rng rng(base_seed() + 41);
  run_family("rows and lrn (" + test::effective_isa_name() + ")", rows_and_lrn_cases(rng));
}

TEST(BackendConsistency, Concat) {
  Rng rng(base_seed() + 29);
  run_family("concat (" + test::effective_isa_name() + ")", concat_cases(rng));
}

// Inputs in another layout than the output are declined: the graph compiler keeps such a join
// plain (oneDNN's concat converted them element by element).
TEST(BackendConsistency, ConcatDeclinesMixedLayouts) {
  Rng rng(base_seed() + 30);
  const TensorLayout layout = TensorLayout::blocked(native_block());
  const int64_t unit = layout.channel_block;
  Case c;
  c.node = make_node("Concat", Attributes{{"axis", int64_t{1}}});
  c.inputs = {rng.tensor({1, unit, 3, 4}), rng.tensor({1, 2 * unit, 3, 4})};
  std::vector<const Tensor*> constants(2, nullptr);
  const std::vector<ValueInfo> inputs = value_infos(c.inputs, "x");
  KernelRequest request{c.node, inputs, infer_outputs(c, inputs, constants), constants};
  request.input_layouts = {layout, layout};
  EXPECT_EQ(KernelRegistry::instance().create_with("dnnl", request), nullptr);  // plain output
  request.output_layouts = {layout};
  EXPECT_NE(KernelRegistry::instance().create_with("dnnl", request), nullptr);
  request.input_layouts = {layout, TensorLayout{}};
  EXPECT_EQ(KernelRegistry::instance().create_with("dnnl", request), nullptr);
}

TEST(BackendConsistency, BinaryBroadcastsBeyondOneDnnsJit) {
  Rng rng(base_seed() + 28);
  run_family("binary broadcasts", binary_broadcast_cases(rng));
}

// The rows read plain tensors: a laid-out operand of such a broadcast is declined, not misread.
TEST(BackendConsistency, BinaryRowsDeclineLaidOutOperands) {
  Rng rng(base_seed() + 31);
  const TensorLayout layout = TensorLayout::blocked(native_block());
  Case c;
  c.node = make_node("Add");
  c.inputs = {rng.tensor({1, native_block(), 4, 5}), rng.tensor({1, native_block(), 4, 1})};
  std::vector<const Tensor*> constants(2, nullptr);
  const std::vector<ValueInfo> inputs = value_infos(c.inputs, "x");
  KernelRequest request{c.node, inputs, infer_outputs(c, inputs, constants), constants};
  std::unique_ptr<Kernel> plain = KernelRegistry::instance().create_with("dnnl", request);
  ASSERT_NE(plain, nullptr);
  if (plain->implementation() != "dnnl:broadcast_rows")
    GTEST_SKIP() << "oneDNN runs this broadcast itself here: " << plain->implementation();
  request.input_layouts = {layout, TensorLayout{}};
  EXPECT_EQ(KernelRegistry::instance().create_with("dnnl", request), nullptr);
}

TEST(BackendConsistency, BinaryInActivationLayouts) {
  Rng rng(base_seed() + 27);
  run_family("binary layouts (" + test::effective_isa_name() + ")", binary_layout_cases(rng));
}

// Conv/MatMul/Gemm carrying the post-ops the graph compiler fuses in
// (engine/ops/fused_post_ops.hpp): "fused_sum" adds a trailing residual input, "fused_activation"
// = Relu follows. Gemm runs only the activation on dnnl and leaves the sum to the reference.
// Products of one or two rows by a constant f32 matrix (a batch-1 classifier head, fully connected
// layer or decoder step), which the kernels stream B for, from a copy of B in panels of 64
// columns (any width: the last panel padded; narrow products on sgemm). Gemm with its transposes,
// alpha, beta, every shape of C and a fused activation (Relu in the store, the others after);
// MatMul with 1-D and flattened batch operands, a fused bias, scale, residual and activation;
// products wide enough to be split over threads.
std::vector<Case> small_rows_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 24; ++k) {
    const int64_t m = 1 + k % 2, n = rng.integer(1, 300), kk = rng.integer(1, 300);
    Attributes attrs;
    const bool ta = k % 4 >= 2, tb = rng.chance(0.5);
    if (ta) attrs.set("transA", int64_t{1});
    if (tb) attrs.set("transB", int64_t{1});
    if (rng.chance(0.4)) attrs.set("alpha", rng.real(-2, 2));
    if (rng.chance(0.4)) attrs.set("beta", rng.pick<double>({0.0, 0.5, 2.0, -1.0}));
    if (k % 3 == 0) attrs.set("fused_activation", std::string(k % 2 ? "Relu" : "HardSwish"));
    const std::vector<ints> c_shapes = {{}, {n}, {1, n}, {m, n}, {m, 1}, {1, 1}, {1}};
    Case c;
    c.node = make_node("Gemm", attrs);
    c.inputs = {rng.tensor(ta ? ints{kk, m} : ints{m, kk}),
                rng.tensor(tb ? ints{n, kk} : ints{kk, n})};
    c.inputs.push_back(k % 5 == 4 ? Tensor() : rng.tensor(c_shapes[static_cast<size_t>(k) % 7]));
    c.constant = {false, true, rng.chance(0.5)};
    c.tolerance = {1e-4, 4e-6 * static_cast<double>(kk)};
    c.implementation = n >= 64 ? "dnnl:streamed_rows" : "dnnl:sgemm";
    cases.push_back(c);
  }
  for (int k = 0; k < 28; ++k) {
    // The last four: B of 1-3 MB, its columns split over the stream's threads.
    const bool wide = k >= 24;
    const int64_t m = 1 + k % 2, n = wide ? rng.integer(700, 1500) : rng.integer(1, 300),
                  kk = wide ? rng.integer(300, 500) : rng.integer(1, 300);
    Attributes attrs;
    ints a{m, kk};
    if (k % 4 == 1) a = {1, m, kk};      // a batch of one, flattened into the rows
    if (k % 4 == 3 && m == 1) a = {kk};  // a 1-D A
    const bool bias = k % 3 != 0, scale = k % 5 < 2, sum = k % 7 < 3;
    if (k % 2 == 0) attrs.set("fused_activation", std::string(k % 4 ? "Gelu" : "Relu"));
    if (k % 6 == 5) attrs.set("fused_activation", std::string("Sigmoid"));
    if (scale) attrs.set("fused_scale", rng.pick<double>({0.125, -2.0, 3.0}));
    Case c;
    c.node = make_node("MatMul", attrs);
    c.inputs = {rng.tensor(a), rng.tensor({kk, n})};
    if (bias) {
      c.node.attributes.set("fused_bias", int64_t{1});
      c.inputs.push_back(rng.tensor({n}));
    }
    if (sum) {
      ints y = a;
      y.back() = n;
      c.node.attributes.set("fused_sum", int64_t{1});
      c.inputs.push_back(rng.tensor(y));
    }
    c.constant.assign(c.inputs.size(), false);
    c.constant[1] = true;
    c.tolerance = {1e-4, 8e-6 * static_cast<double>(kk)};
    c.implementation = n >= 64 ? "dnnl:streamed_rows" : "dnnl:sgemm";
    cases.push_back(c);
  }
  return cases;
}

TEST(BackendConsistency, SmallRowProductsByAConstant) {
  Rng rng(base_seed() + 23);
  run_family("small rows", small_rows_cases(rng));
}

// 1x1 Convs of one-pixel images in batches of one and two (a squeeze-and-excitation block's fully
// connected layers), which stream their weights as a product of rows: with and without bias,
// activations in the store and after, a fused residual, in every activation layout of this ISA
// whose pixels are dense rows (whole channel blocks). Narrow outputs stay on oneDNN.
std::vector<Case> one_pixel_conv_cases(Rng& rng) {
  const std::vector<TensorLayout> layouts = activation_layouts();
  const std::vector<std::string> activations = {"", "Relu", "Sigmoid", "HardSwish", "Swish"};
  std::vector<Case> cases;
  for (int k = 0; k < 30; ++k) {
    const TensorLayout layout = layouts[static_cast<size_t>(k) % layouts.size()];
    const int64_t unit = layout.channel_block ? layout.channel_block : 1;
    const int64_t batch = 1 + k % 2;
    const int64_t in = unit * rng.integer(1, 600 / unit);
    const bool narrow = k % 10 == 9;
    const int64_t out = narrow ? unit * 2 : unit * rng.integer((64 + unit - 1) / unit, 600 / unit);
    const bool bias = k % 4 != 3, sum = k % 5 == 2;
    Attributes attrs;
    const std::string& activation = activations[static_cast<size_t>(k / 3) % activations.size()];
    if (!activation.empty()) attrs.set("fused_activation", activation);
    Case c;
    c.node = make_node("Conv", attrs);
    c.inputs = {rng.tensor({batch, in, 1, 1}), rng.tensor({out, in, 1, 1}, -0.2, 0.2),
                bias ? rng.tensor({out}) : Tensor()};
    if (sum) {
      c.node.attributes.set("fused_sum", int64_t{1});
      c.inputs.push_back(rng.tensor({batch, out, 1, 1}));
    } else if (!bias) {
      c.inputs.pop_back();
    }
    c.constant.assign(c.inputs.size(), false);
    c.constant[1] = true;
    c.input_layouts.assign(c.inputs.size(), TensorLayout{});
    c.input_layouts[0] = layout;
    if (sum) c.input_layouts[3] = layout;
    c.output_layout = layout;
    c.tolerance = {1e-4, 4e-6 * static_cast<double>(in)};
    c.implementation = narrow ? "" : "dnnl:streamed_rows";
    cases.push_back(c);
  }
  return cases;
}

TEST(BackendConsistency, OnePixelPointwiseConvolutionsStreamTheirWeights) {
  Rng rng(base_seed() + 41);
  run_family("one-pixel 1x1 conv (" + test::effective_isa_name() + ")", one_pixel_conv_cases(rng));
}

// Products by a constant 2-D B of three rows and more, wider than deep, which troupe's packed
// GEMM computes on AVX2 CPUs (kernels/dnnl/packed_gemm_avx2.hpp; oneDNN's matmul on others):
// row counts around its 6-row tiles and 120-row blocks, depths across its 768-deep blocks,
// column counts around its 16-wide panels, each with every epilogue in turn (bias, scale,
// residual, ReLU, activations oneDNN applies after it), a batched A, Gemm's transB, alpha and
// bias row; products large enough to be split between threads by columns and by rows.
std::vector<Case> packed_gemm_cases(Rng& rng) {
  std::vector<Case> cases;
  const bool packed = kernels::onednn::Avx2PackedGemm::preferred();
  struct Product {
    int64_t m, k, n;
  };
  const std::vector<Product> products = {{3, 1, 7},       {6, 5, 16},      {7, 5, 17},
                                         {13, 64, 200},   {121, 64, 200},  {197, 16, 40},
                                         {13, 769, 1000}, {7, 1600, 1700}, {197, 64, 1000},
                                         {3, 16, 17},     {121, 769, 800}, {197, 39, 50}};
  const std::vector<std::string> activations = {"", "Relu", "Gelu", "Sigmoid"};
  for (int k = 0; k < 36; ++k) {
    const Product& p = products[static_cast<size_t>(k) % products.size()];
    const bool bias = k % 2 == 0, sum = k % 5 == 1, scale = !sum && k % 3 == 2;
    ints a{p.m, p.k};
    if (k % 4 == 3) a = {2, p.m, p.k};
    Case c;
    c.node = make_node("MatMul");
    const std::string& activation = activations[static_cast<size_t>(k / 3) % activations.size()];
    if (!activation.empty()) c.node.attributes.set("fused_activation", activation);
    if (scale) c.node.attributes.set("fused_scale", rng.pick<double>({0.125, -2.0}));
    c.inputs = {rng.tensor(a), rng.tensor({p.k, p.n})};
    if (bias) {
      c.node.attributes.set("fused_bias", int64_t{1});
      c.inputs.push_back(rng.tensor({p.n}));
    }
    if (sum) {
      ints y = a;
      y.back() = p.n;
      c.node.attributes.set("fused_sum", int64_t{1});
      c.inputs.push_back(rng.tensor(y));
    }
    c.constant.assign(c.inputs.size(), false);
    c.constant[1] = true;
    c.tolerance = {1e-4, 2e-6 * static_cast<double>(p.k)};
    if (packed) c.implementation = "dnnl:packed_gemm:avx2";
    cases.push_back(c);
  }
  for (int k = 0; k < 12; ++k) {
    const Product& p = products[static_cast<size_t>(k)];
    const bool tb = k % 2 == 1, with_c = k % 3 != 0;
    Attributes attrs{{"transB", int64_t{tb}}};
    if (!with_c) attrs.set("alpha", 0.5);
    if (k % 4 == 0) attrs.set("fused_activation", std::string("Relu"));
    Case c;
    c.node = make_node("Gemm", attrs);
    c.inputs = {rng.tensor({p.m, p.k}), rng.tensor(tb ? ints{p.n, p.k} : ints{p.k, p.n}),
                with_c ? rng.tensor(k % 2 ? ints{p.n} : ints{1, p.n}) : Tensor()};
    c.constant = {false, true, true};
    c.tolerance = {1e-4, 4e-6 * static_cast<double>(p.k)};
    if (packed) c.implementation = "dnnl:packed_gemm:avx2";
    cases.push_back(c);
  }
  return cases;
}

TEST(BackendConsistency, ProductsByAConstantOnThePackedGemm) {
  Rng rng(base_seed() + 29);
  run_family("packed gemm", packed_gemm_cases(rng));
}

// TROUPE_PACKED_GEMM=0 leaves the products to oneDNN's matmul (an A/B switch, like
// TROUPE_CONV_WINOGRAD); a value that is no switch is named in the error.
TEST(BackendConsistency, ThePackedGemmIsASwitch) {
  Rng rng(base_seed() + 31);
  std::vector<Tensor> inputs = {rng.tensor({8, 16}), rng.tensor({16, 24})};
  const std::vector<ValueInfo> infos = value_infos(inputs, "x");
  Case c;
  c.node = make_node("MatMul");
  c.inputs = inputs;
  const std::vector<ValueInfo> outputs = infer_outputs(c, infos, {nullptr, &inputs[1]});
  const KernelRequest request{c.node, infos, outputs, {nullptr, &inputs[1]}};
  {
    const test::ScopedEnv off("TROUPE_PACKED_GEMM", "0");
    const std::unique_ptr<Kernel> kernel = KernelRegistry::instance().create_with("dnnl", request);
    ASSERT_TRUE(kernel);
    EXPECT_EQ(kernel->implementation().find("packed_gemm"), std::string::npos);
  }
  const test::ScopedEnv malformed("TROUPE_PACKED_GEMM", "yes");
  if (!kernels::onednn::Avx2PackedGemm::preferred()) return;  // never asks where it cannot run
  try {
    KernelRegistry::instance().create_with("dnnl", request);
    ADD_FAILURE() << "a malformed TROUPE_PACKED_GEMM was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("TROUPE_PACKED_GEMM='yes'"), std::string::npos)
        << e.what();
  }
}

std::vector<Case> fused_cases(Rng& rng) {
  std::vector<Case> base = conv_cases(rng);
  base.resize(24);
  std::vector<Case> products = matmul_cases(rng);
  base.insert(base.end(), products.begin(), products.begin() + 16);       // MatMul
  base.insert(base.end(), products.begin() + 40, products.begin() + 56);  // Gemm
  std::vector<Case> cases;
  for (size_t k = 0; k < base.size(); ++k) {
    Case c = base[k];
    const bool relu = k % 3 != 1;
    const bool sum = k % 3 != 0;
    if (relu) c.node.attributes.set("fused_activation", std::string("Relu"));
    if (sum) {
      std::vector<const Tensor*> constants(c.inputs.size(), nullptr);
      const ValueInfo out = infer_outputs(base[k], value_infos(c.inputs, "x"), constants)[0];
      c.inputs.resize(c.node.op_type == "MatMul" ? 2 : 3);
      c.inputs.push_back(rng.tensor(out.shape.dims()));
      c.node.attributes.set("fused_sum", int64_t{1});
    }
    c.must_accept = !(sum && c.node.op_type == "Gemm");
    cases.push_back(c);
  }
  return cases;
}

TEST(BackendConsistency, FusedPostOps) {
  Rng rng(base_seed() + 20);
  run_family("fused", fused_cases(rng));
}

// A 1x1 Conv with the 3x3 depthwise Conv fused into it (MobileNet's expand and depthwise pair):
// strides 1 and 2, odd and even sizes, batches of 1 and 2, with and without the 1x1 bias and the
// two activations (the first a clip or a Swish). The first case is MobileNetV2's shape that
// oneDNN 2.6 runs as one JIT kernel.
std::vector<Case> fused_depthwise_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 16; ++k) {
    const int64_t n = k % 4 == 3 ? 2 : 1;
    const int64_t c = k == 0 ? 16 : rng.pick(ints{8, 16, 24});
    const int64_t m = k == 0 ? 96 : rng.pick(ints{16, 32, 48, 96});
    const int64_t h = k == 0 ? 112 : rng.integer(5, 30);
    const int64_t w = k == 0 ? 112 : rng.integer(5, 30);
    const int64_t stride = k == 0 ? 2 : 1 + k % 2;
    Attributes attrs{{"fused_depthwise", int64_t{1}}, {"fused_dw_stride", stride}};
    if (k % 3 == 0) {
      attrs.set("fused_activation", std::string("Clip"));
      attrs.set("fused_activation_alpha", 0.0);
      attrs.set("fused_activation_beta", 6.0);
    } else if (k % 3 == 1) {
      // EfficientNet's pair: the Swish comes before the depthwise post-op, never after it.
      attrs.set("fused_activation", std::string("Swish"));
    }
    if (k % 4 != 1) attrs.set("fused_dw_activation", std::string(k % 2 ? "Relu" : "Clip"));
    if (k % 4 != 1 && k % 2 == 0) attrs.set("fused_dw_activation_beta", 6.0);
    Case fused;
    fused.node = make_node("Conv", attrs);
    fused.inputs = {rng.tensor({n, c, h, w}, -2, 2), rng.tensor({m, c, 1, 1}),
                    k % 5 == 4 ? Tensor() : rng.tensor({m}), rng.tensor({m, 1, 3, 3}),
                    rng.tensor({m})};
    fused.constant = {false, true, true, true, true};
    cases.push_back(fused);
  }
  return cases;
}

TEST(BackendConsistency, FusedDepthwise) {
  Rng rng(base_seed() + 24);
  std::vector<Case> cases = fused_depthwise_cases(rng);
  // MobileNetV2's first stride-2 pair is one JIT kernel on both ISAs (the other cases include
  // oneDNN's ref_fused_convolution); oneDNN 2.6's 1x1 kernels with a dw post-op read the depthwise
  // bias only when the 1x1 convolution has one, so the pair also runs without the 1x1 bias, and in
  // each activation layout.
  const std::string one_pass =
      test::cpu_has_avx512() ? "dnnl:jit_1x1:avx512_core with dw" : "dnnl:jit_1x1:avx2 with dw";
  cases[0].implementation = one_pass;
  for (TensorLayout layout : {TensorLayout{}, TensorLayout::blocked(native_block())}) {
    Case no_bias = cases[0];
    no_bias.inputs[2] = Tensor();
    no_bias.input_layouts = {layout};
    no_bias.output_layout = layout;
    cases.push_back(no_bias);
  }
  // EfficientNet's pair in that one kernel, a Swish after each convolution.
  Case swish = cases[0];
  swish.node.attributes.set("fused_activation", std::string("Swish"));
  swish.node.attributes.set("fused_activation_alpha", 1.0);
  swish.node.attributes.set("fused_dw_activation", std::string("Swish"));
  cases.push_back(swish);
  run_family("fused depthwise (" + test::effective_isa_name() + ")", cases);
}

// oneDNN 2.6's 1x1 kernels with a dw post-op mis-address channels-last tensors (fixed in 2.7):
// the dnnl kernel declines a fused pair in that layout instead of running it.
TEST(BackendConsistency, FusedDepthwiseDeclinesChannelsLast) {
  Rng rng(base_seed() + 25);
  Case c = fused_depthwise_cases(rng)[0];
  c.input_layouts = {TensorLayout::channels_last_order()};
  c.output_layout = TensorLayout::channels_last_order();
  std::vector<const Tensor*> constants;
  for (size_t i = 0; i < c.inputs.size(); ++i) constants.push_back(i == 0 ? nullptr : &c.inputs[i]);
  const std::vector<ValueInfo> inputs = value_infos(c.inputs, "x");
  KernelRequest request{c.node, inputs, infer_outputs(c, inputs, constants), constants};
  request.input_layouts = c.input_layouts;
  request.output_layouts = {c.output_layout};
  EXPECT_EQ(KernelRegistry::instance().create_with("dnnl", request), nullptr);
}

// Every fused activation of the contract on Conv/MatMul/Gemm, and MatMul's fused bias and scale,
// alone and together with a residual sum.
std::vector<Case> fused_activation_cases(Rng& rng) {
  std::vector<Case> base = conv_cases(rng);
  base.resize(24);
  std::vector<Case> products = matmul_cases(rng);
  base.insert(base.end(), products.begin(), products.begin() + 40);       // MatMul
  base.insert(base.end(), products.begin() + 40, products.begin() + 56);  // Gemm
  const std::vector<std::string> activations = {"",         "Relu",  "LeakyRelu", "Clip",
                                                "Sigmoid",  "Tanh",  "HardSwish", "Gelu",
                                                "GeluTanh", "Swish", "Mish"};
  std::vector<Case> cases;
  for (size_t k = 0; k < base.size(); ++k) {
    Case c = base[k];
    const std::string act = activations[k % activations.size()];
    Attributes& a = c.node.attributes;
    if (!act.empty()) a.set("fused_activation", act);
    if (act == "LeakyRelu" && rng.chance(0.7)) a.set("fused_activation_alpha", rng.real(0.01, 0.5));
    if (act == "Swish" && rng.chance(0.5)) a.set("fused_activation_alpha", rng.real(0.5, 2.0));
    if (act == "Clip") {
      // Either bound may be absent (unbounded on that side).
      const int which = static_cast<int>(rng.integer(0, 2));
      if (which != 2) a.set("fused_activation_alpha", rng.real(-1, 0));
      if (which != 1) a.set("fused_activation_beta", rng.real(0, 1));
    }
    const bool is_matmul = c.node.op_type == "MatMul";
    const ValueInfo out = infer_outputs(base[k], value_infos(base[k].inputs, "x"),
                                        std::vector<const Tensor*>(base[k].inputs.size()))[0];
    const int64_t n = out.shape.rank() == 0 ? 1 : out.shape[out.shape.rank() - 1];
    const bool bias = is_matmul && rng.chance(0.6);
    const bool scale = is_matmul && rng.chance(0.5);
    const bool sum = c.node.op_type != "Gemm" && rng.chance(0.4);
    if (bias) {
      a.set("fused_bias", int64_t{1});
      c.inputs.push_back(rng.tensor({n}));
      c.constant.resize(c.inputs.size(), false);
      c.constant.back() = rng.chance(0.8);
    }
    if (scale) a.set("fused_scale", rng.pick<double>({0.125, 0.35355339, -2.0, 3.0}));
    if (sum) {
      if (c.node.op_type == "Conv") c.inputs.resize(3);  // residual is input 3, after the bias
      c.inputs.push_back(rng.tensor(out.shape.dims()));
      c.node.attributes.set("fused_sum", int64_t{1});
    }
    c.constant.resize(c.inputs.size(), false);
    // A fused bias needs B of rank >= 2: a 1-D B drops the axis it runs along.
    c.must_accept = !(bias && c.inputs[1].shape().rank() == 1);
    if (scale) c.tolerance.atol *= 4;
    cases.push_back(c);
  }
  return cases;
}

TEST(BackendConsistency, FusedActivationsBiasAndScale) {
  Rng rng(base_seed() + 21);
  run_family("fused activations", fused_activation_cases(rng));
}

// Two-operand Einsum as models write it (attention scores and context in both head orders, Linear
// layers, batched and broadcast '...' products, outer products, transposed outputs, products with
// every label a batch label), with random sizes; the kernel reads the operands in place or
// reorders them, and writes the output in place or through a reorder. Equations it leaves to the
// reference (a diagonal, a label summed within one operand, a scalar result) are declined.
std::vector<Case> einsum_cases(Rng& rng) {
  struct Eq {
    const char* equation;
    const char* a;  // the letters' order of each operand's dims
    const char* b;
    bool accepted;
  };
  const std::vector<Eq> equations = {
      {"bqhd,bkhd->bhqk", "bqhd", "bkhd", true},
      {"bhqk,bkhd->bqhd", "bhqk", "bkhd", true},
      {"bhqd,bhkd->bhqk", "bhqd", "bhkd", true},
      {"ij,jk->ik", "ij", "jk", true},
      {"ik,jk->ij", "ik", "jk", true},
      {"ij,jk->ki", "ij", "jk", true},
      {"bij,bjk->bik", "bij", "bjk", true},
      {"abc,cd->abd", "abc", "cd", true},
      {"i,j->ij", "i", "j", true},
      {"bn,anm->bam", "bn", "anm", true},
      {"ij,ij->ij", "ij", "ij", true},
      {"bid,bjd->bij", "bid", "bjd", true},
      {"nchw,oc->nohw", "nchw", "oc", true},
      {"ii,ij->ij", "ii", "ij", false},
      {"ij,jk->i", "ij", "jk", false},
      {"i,i->", "i", "i", false},
  };
  std::vector<Case> cases;
  for (const Eq& eq : equations) {
    for (int k = 0; k < 3; ++k) {
      std::map<char, int64_t> size;
      for (char c : std::string(eq.a) + eq.b) size.emplace(c, rng.integer(1, 9));
      if (std::string(eq.a) == "ii") size['i'] = 4;
      ints a, b;
      for (char c : std::string(eq.a)) a.push_back(size[c]);
      for (char c : std::string(eq.b)) b.push_back(size[c]);
      Case c;
      c.node = make_node("Einsum", Attributes{{"equation", std::string(eq.equation)}});
      c.inputs = {rng.tensor(a), rng.tensor(b)};
      c.constant = {false, k == 2};
      c.must_accept = eq.accepted;
      c.fast_implementation = true;
      cases.push_back(c);
    }
  }
  // '...' broadcast: a batch of matrices times one matrix, and batches of 1 against n.
  for (int k = 0; k < 6; ++k) {
    const int64_t m = rng.integer(1, 7), kk = rng.integer(1, 7), n = rng.integer(1, 7);
    Case c;
    c.node = make_node("Einsum", Attributes{{"equation", std::string("...ij,...jk->...ik")}});
    const int64_t batch = rng.integer(2, 4);
    c.inputs = {rng.tensor(k % 2 ? ints{batch, 1, m, kk} : ints{batch, 3, m, kk}),
                rng.tensor(k % 3 == 0 ? ints{kk, n} : ints{1, 3, kk, n})};
    c.constant = {false, false};
    c.fast_implementation = true;
    cases.push_back(c);
  }
  return cases;
}

TEST(BackendConsistency, Einsum) {
  Rng rng(base_seed() + 36);
  run_family("einsum (" + test::effective_isa_name() + ")", einsum_cases(rng));
}

// A Linear layer whose output is scaled and added to the residual, x + 0.5 * (xW + b), as in a
// Conformer's half-step feed-forward: bias, scale and sum fused into one MatMul, optionally then
// an activation. On AVX2 oneDNN's gemm-based matmul takes the sum only as its first post-op, so
// the kernel reorders the chain; neither ISA may run oneDNN's reference kernel.
std::vector<Case> scaled_residual_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 12; ++k) {
    const int64_t m = rng.integer(2, 40), kk = rng.integer(8, 96), n = rng.integer(8, 96);
    Attributes attrs;
    attrs.set("fused_bias", int64_t{1});
    attrs.set("fused_sum", int64_t{1});
    attrs.set("fused_scale", rng.pick<double>({0.5, 0.25, 0.35355339, 2.0, -1.5}));
    if (k % 3 == 2) attrs.set("fused_activation", std::string("Relu"));
    Case c;
    c.node = make_node("MatMul", attrs);
    const ints a = k % 2 ? ints{1, m, kk} : ints{m, kk};
    ints y = a;
    y.back() = n;
    c.inputs = {rng.tensor(a), rng.tensor({kk, n}), rng.tensor({n}), rng.tensor(y)};
    c.constant = {false, true, true, false};
    c.tolerance = {1e-4, 2e-6 * static_cast<double>(kk)};
    c.fast_implementation = true;
    cases.push_back(c);
  }
  return cases;
}

TEST(BackendConsistency, MatMulWithScaledResidualRunsFast) {
  Rng rng(base_seed() + 35);
  run_family("scaled residual (" + test::effective_isa_name() + ")", scaled_residual_cases(rng));
}

// Conv, MatMul and Gemm computing in bf16 (INFERENCE_PRECISION_HINT bf16), with and without fused
// post-ops. Against the reference on bf16-rounded inputs the only differences left are the order
// of the f32 sums, so the tolerance is f32's, a little wider for the longer dot products.
std::vector<Case> bf16_cases(Rng& rng) {
  std::vector<Case> cases = conv_cases(rng);
  cases.resize(24);
  std::vector<Case> products = matmul_cases(rng);
  cases.insert(cases.end(), products.begin(), products.end());
  std::vector<Case> fused = fused_activation_cases(rng);
  cases.insert(cases.end(), fused.begin(), fused.end());
  std::vector<Case> transposed = conv_transpose_cases(rng);
  transposed.resize(12);
  cases.insert(cases.end(), transposed.begin(), transposed.end());
  for (Case& c : cases) {
    c.precision = ElementType::bf16;
    c.tolerance = {2e-4, 5e-5};
  }
  // 3x3 convolutions Winograd computes: in bf16 they run as f32 Winograd where it was timed
  // faster, else bf16 direct (either is checked against its own specification above).
  std::vector<Case> winograd = winograd_cases(rng);
  winograd.resize(14);
  for (Case& c : winograd) {
    c.precision = ElementType::bf16;
    c.implementation_part.clear();
    c.tolerance = {2e-4, 2e-6 * static_cast<double>(c.inputs[1].shape()[1] * 9) + 5e-5};
  }
  cases.insert(cases.end(), winograd.begin(), winograd.end());
  // A 1x1 convolution with the depthwise one fused after it: on MobileNetV2's shape oneDNN runs
  // the pair in bf16 in one pass, the value between the two held in bf16 (an f32 kernel there
  // would name itself ".../f32", and the graph compiler would leave the pair unfused). The
  // reference rounds neither the depthwise weights nor that value: each of the 9 products may be
  // off by 2^-8 of |w| |t| <= 1 x 6 (ReLU6 between the two), random in sign; the bound is about
  // five deviations of their sum.
  Case pair = fused_depthwise_cases(rng)[0];
  pair.precision = ElementType::bf16;
  pair.tolerance = {1e-2, 8e-2};
  pair.implementation_part = "bf16_1x1";
  cases.push_back(pair);
  return cases;
}

TEST(BackendConsistency, Bf16ConvMatMulGemm) {
  // oneDNN runs bf16 natively or, on other AVX-512 CPUs, in emulation.
  if (!test::cpu_has_avx512()) GTEST_SKIP() << "oneDNN runs bf16 only on AVX-512 CPUs";
  Rng rng(base_seed() + 23);
  run_family("bf16", bf16_cases(rng));
}

std::vector<Case> transpose_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 40; ++k) {
    const size_t rank = static_cast<size_t>(rng.integer(0, 6));
    const ints dims = rng.dims(rank, 1, rank > 4 ? 5 : 9);
    ints perm(rank);
    for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(static_cast<unsigned>(k)));
    Attributes attrs;
    if (k % 5 != 0) attrs.set("perm", perm);  // else the default: reversed axes
    Case c;
    c.node = make_node("Transpose", attrs);
    c.inputs = {rng.tensor(dims)};
    c.constant = {false};
    c.tolerance = {0, 0};  // a copy
    cases.push_back(c);
  }
  // The attention layouts of a transformer: [1,t,h,d] <-> [1,h,t,d] and [1,h,d,t]; with d = 64
  // the first moves rows of d elements.
  for (const int64_t d : {8, 64})
    for (const ints& perm : {ints{0, 2, 1, 3}, ints{0, 2, 3, 1}}) {
      Case c;
      c.node = make_node("Transpose", Attributes{{"perm", perm}});
      c.inputs = {rng.tensor({1, 16, 12, d})};
      c.constant = {false};
      c.tolerance = {0, 0};
      if (d == 64 && perm[3] == 3) c.implementation = "dnnl:row_copy";
      cases.push_back(c);
    }
  // Permutations that keep the innermost axes in order (rows of 16 or more elements, size-1 axes
  // anywhere) move whole rows; the identity is one row.
  for (int k = 0; k < 20; ++k) {
    const size_t rank = static_cast<size_t>(rng.integer(2, 5));
    const size_t kept = static_cast<size_t>(rng.integer(1, static_cast<int64_t>(rank) - 1));
    ints dims = rng.dims(rank, 1, 5);
    dims[rank - 1] = rng.integer(16, 40);
    if (k % 4 == 1) dims[rng.integer(0, static_cast<int64_t>(rank) - 2)] = 1;
    ints perm(rank);
    for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
    if (k % 5 != 0)
      std::shuffle(perm.begin(), perm.end() - static_cast<std::ptrdiff_t>(kept),
                   std::mt19937(static_cast<unsigned>(k)));
    Case c;
    c.node = make_node("Transpose", Attributes{{"perm", perm}});
    c.inputs = {rng.tensor(dims)};
    c.constant = {false};
    c.tolerance = {0, 0};
    c.implementation = "dnnl:row_copy";
    cases.push_back(c);
  }
  // Large enough to copy rows on several threads (Swin's window partition, an odd row count).
  for (const auto& [dims, perm] :
       std::vector<std::pair<ints, ints>>{{{1, 8, 7, 8, 7, 96}, {0, 1, 3, 2, 4, 5}},
                                          {{3, 49, 5, 7, 32}, {2, 0, 3, 1, 4}},
                                          {{1, 7, 9, 11, 8, 96}, {0, 3, 1, 4, 2, 5}}}) {
    Case c;
    c.node = make_node("Transpose", Attributes{{"perm", perm}});
    c.inputs = {rng.tensor(dims)};
    c.constant = {false};
    c.tolerance = {0, 0};
    c.implementation = "dnnl:row_copy";
    cases.push_back(c);
  }
  // Reading a channels-last activation (a detector head's [N,C,H,W] -> [N,H,W,C] is the layout's
  // own order: one copy, on several threads when large), every permutation of ranks 3 and 4.
  for (const ints& dims : {ints{2, 5, 3, 4}, ints{1, 810, 64, 64}, ints{3, 7, 17}}) {
    ints perm(dims.size());
    std::iota(perm.begin(), perm.end(), int64_t{0});
    do {
      const bool large = dims[1] == 810;
      if (large && perm != ints{0, 2, 3, 1} && perm != ints{0, 1, 3, 2}) continue;
      Case c;
      c.node = make_node("Transpose", Attributes{{"perm", perm}});
      c.inputs = {rng.tensor(dims)};
      c.constant = {false};
      c.input_layouts = {TensorLayout::channels_last_order()};
      c.tolerance = {0, 0};
      if (perm == ints{0, 2, 3, 1} || perm == ints{0, 2, 1}) c.implementation = "dnnl:row_copy";
      cases.push_back(c);
      // Writing a channels-last output instead (into a convolution): [N,H,W,C] -> [N,C,H,W]
      // is the input's order; and both ends laid out.
      if (large && perm != ints{0, 2, 3, 1}) continue;
      Case written = c;
      written.input_layouts.clear();
      written.output_layout = TensorLayout::channels_last_order();
      const bool in_order = perm == ints{0, 3, 1, 2} || perm == ints{0, 2, 1};
      written.implementation = in_order ? "dnnl:row_copy" : "";
      cases.push_back(written);
      Case both = c;
      both.output_layout = TensorLayout::channels_last_order();
      both.implementation =
          perm == ints{0, 1, 2, 3} || perm == ints{0, 1, 2} ? "dnnl:row_copy" : "";
      cases.push_back(both);
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
  return cases;
}

// Values of `type` with many exact ties: f32 quarters (and a few NaNs, which compare false and
// cast to 0), small integers, booleans.
Tensor tied_values(ElementType type, const ints& dims, Rng& rng) {
  Tensor t(type, Shape(dims));
  for (int64_t i = 0; i < t.size(); ++i) {
    const double v = std::round(rng.real(-2, 2) * 4) / 4;
    switch (type) {
      case ElementType::f32:
        t.data<float>()[i] = rng.chance(0.01) ? std::nanf("") : static_cast<float>(v);
        break;
      case ElementType::i32:
        t.data<int32_t>()[i] = static_cast<int32_t>(rng.integer(-3, 3));
        break;
      case ElementType::i64:
        t.data<int64_t>()[i] = rng.integer(-3, 3);
        break;
      default:
        t.data<bool>()[i] = rng.chance(0.5);
    }
  }
  return t;
}

// Two operand shapes broadcasting into a random output of rank 1-4: each axis of each operand
// full or 1, leading axes sometimes dropped.
std::pair<ints, ints> broadcast_pair(Rng& rng) {
  const ints out = rng.dims(static_cast<size_t>(rng.integer(1, 4)), 1, 9);
  ints a = out, b = out;
  for (size_t d = 0; d < out.size(); ++d) {
    if (rng.chance(0.4)) a[d] = 1;
    if (rng.chance(0.4)) b[d] = 1;
  }
  if (rng.chance(0.3)) a.erase(a.begin());
  if (rng.chance(0.3)) b.erase(b.begin());
  return {a, b};
}

// Comparisons into bool, of f32, i32 and i64: operands of one shape (a detector's heatmap against
// its max-pooled self, with many exact ties), one of them a single value, and any broadcast (a
// KAN layer's inputs [64,784,1] against its grid [784,11], large enough to be shared among
// threads); NaNs compare false.
std::vector<Case> comparison_cases(Rng& rng) {
  std::vector<Case> cases;
  const char* ops[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"};
  const ElementType types[] = {ElementType::f32, ElementType::i32, ElementType::i64};
  for (const char* op : ops) {
    for (int pairing = 0; pairing < 7; ++pairing) {
      const ElementType type = pairing < 4 ? ElementType::f32 : types[pairing % 3];
      ints full = pairing == 0 ? ints{1, 20, 128, 128} : rng.dims(3, 1, 40);
      ints other = pairing == 0 || pairing == 1 ? full
                   : pairing == 2               ? ints{1}
                                                : ints{full[0], 1, full[2]};
      if (pairing == 4) full = {64, 784, 1}, other = {784, 11};
      if (pairing >= 5) std::tie(full, other) = broadcast_pair(rng);
      const Tensor a = tied_values(type, full, rng);
      const Tensor b = tied_values(type, other, rng);
      Case c;
      c.node = make_node(op);
      c.inputs = pairing == 2 && std::string(op) == "Less" ? std::vector<Tensor>{b, a}
                                                           : std::vector<Tensor>{a, b};
      c.constant = {false, false};
      c.tolerance = {0, 0};
      c.implementation = "dnnl:comparison";
      cases.push_back(c);
    }
  }
  return cases;
}

// And, Or and Xor of bool tensors under any broadcast (a KAN layer's two interval masks, an
// attention mask joined with a causal one).
std::vector<Case> logical_cases(Rng& rng) {
  std::vector<Case> cases;
  for (const char* op : {"And", "Or", "Xor"})
    for (int k = 0; k < 8; ++k) {
      auto [a, b] = broadcast_pair(rng);
      if (k == 0) a = {64, 784, 11}, b = {64, 784, 11};
      if (k == 1) a = {2, 8, 128, 128}, b = {128, 128};
      Case c;
      c.node = make_node(op);
      c.inputs = {tied_values(ElementType::boolean, a, rng),
                  tied_values(ElementType::boolean, b, rng)};
      c.constant = {false, false};
      c.tolerance = {0, 0};
      c.implementation = "dnnl:logical";
      cases.push_back(c);
    }
  return cases;
}

// Integer Add, Sub, Mul, Div, Max and Min of i64 and i32 under any broadcast (the index
// arithmetic of an unpooling, a batch offset added to neighbour indices), including i32 sums and
// products that wrap, divisions of either sign (truncated toward zero), and a large one shared
// among threads.
TEST(BackendConsistency, IntegerArithmetic) {
  Rng rng(base_seed() + 85);
  std::vector<Case> cases;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"})
    for (const ElementType type : {ElementType::i64, ElementType::i32})
      for (int k = 0; k < 5; ++k) {
        auto [a, b] = broadcast_pair(rng);
        if (k == 0) a = {2, 16, 128, 128}, b = {2, 16, 1, 1};
        Case c;
        c.node = make_node(op);
        for (int operand = 0; operand < 2; ++operand) {
          Tensor t(type, Shape(operand == 0 ? a : b));
          for (int64_t i = 0; i < t.size(); ++i) {
            int64_t v = rng.integer(-60, 60);
            if (std::string(op) == "Div" && v == 0 && operand == 1) v = 7;  // divisors
            // i32 sums and products that wrap (the reference computes them in int64 and stores
            // the low half); an int64 overflow is undefined in the reference's C++ itself.
            if (k == 1 && i % 5 == 0 && std::string(op) != "Div" && type == ElementType::i32)
              v = std::numeric_limits<int32_t>::max() - v;
            if (type == ElementType::i64)
              t.data<int64_t>()[i] = v;
            else
              t.data<int32_t>()[i] = static_cast<int32_t>(v);
          }
          c.inputs.push_back(t);
        }
        c.constant = {false, false};
        c.tolerance = {0, 0};
        c.implementation = "dnnl:integer_rows";
        cases.push_back(c);
      }
  run_family("integer arithmetic", cases);

  // A zero divisor fails the request naming the node, as the reference does.
  Case c;
  c.node = make_node("Div");
  c.inputs = {Tensor::from_vector<int64_t>(Shape{3}, {4, 5, 6}),
              Tensor::from_vector<int64_t>(Shape{3}, {2, 0, 3})};
  const std::vector<const Tensor*> none = {nullptr, nullptr};
  const std::vector<ValueInfo> inputs = value_infos(c.inputs, "x");
  const KernelRequest request{c.node, inputs, infer_outputs(c, inputs, none), none};
  auto fast = KernelRegistry::instance().create_with("dnnl", request);
  ASSERT_TRUE(fast);
  std::vector<Tensor> y = {Tensor(ElementType::i64, Shape{3})};
  try {
    fast->execute(c.inputs, y);
    ADD_FAILURE() << "a zero divisor ran";
  } catch (const ExecutionError& e) {
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("integer division by zero"));
  }
}

TEST(BackendConsistency, LogicalOps) {
  Rng rng(base_seed() + 83);
  run_family("logical", logical_cases(rng));
}

// Cast between every pair of f32, f64, i32, i64, u8, i8 and bool, with the values where the
// conversions differ: fractions of either sign (truncated toward zero), NaN (0), infinities and
// magnitudes beyond int64 (saturated, then wrapped into the narrower type), integers that wrap
// into u8 and i8, zero and nonzero to bool. Large enough to be shared among threads.
int64_t onnx_type_id(ElementType type) {
  switch (type) {
    case ElementType::f32:
      return 1;
    case ElementType::u8:
      return 2;
    case ElementType::i8:
      return 3;
    case ElementType::i32:
      return 6;
    case ElementType::i64:
      return 7;
    case ElementType::boolean:
      return 9;
    default:
      return 11;  // f64
  }
}

TEST(BackendConsistency, CastBetweenNumericTypes) {
  Rng rng(base_seed() + 84);
  const std::vector<ElementType> types = {ElementType::f32,    ElementType::f64, ElementType::i32,
                                          ElementType::i64,    ElementType::u8,  ElementType::i8,
                                          ElementType::boolean};
  const std::vector<double> specials = {
      0.0,   -0.0, 0.5,   -0.5,     1.75,      -1.75, 255.0, 256.0, -129.,   1e10,
      -1e10, 3e19, -3e19, INFINITY, -INFINITY, NAN,   1.0,   127.9, 70000.5, -2147483649.0};
  for (ElementType from : types)
    for (ElementType to : types) {
      Tensor x(from, Shape{300001});
      for (int64_t i = 0; i < x.size(); ++i) {
        const double v = i < static_cast<int64_t>(specials.size())
                             ? specials[static_cast<size_t>(i)]
                             : rng.real(-300, 300);
        switch (from) {
          case ElementType::f32:
            x.data<float>()[i] = static_cast<float>(v);
            break;
          case ElementType::f64:
            x.data<double>()[i] = v;
            break;
          case ElementType::boolean:
            x.data<bool>()[i] = v != 0;
            break;
          default: {
            // Integers: the specials' int64 wraps, then random values across the type's range.
            const int64_t n = std::isfinite(v) && std::fabs(v) < 9e18 ? static_cast<int64_t>(v)
                                                                      : rng.integer(-5, 5);
            if (from == ElementType::i32) x.data<int32_t>()[i] = static_cast<int32_t>(n);
            if (from == ElementType::i64) x.data<int64_t>()[i] = n * (i % 7 == 0 ? 1 << 20 : 1);
            if (from == ElementType::u8) x.data<uint8_t>()[i] = static_cast<uint8_t>(n);
            if (from == ElementType::i8) x.data<int8_t>()[i] = static_cast<int8_t>(n);
          }
        }
      }
      Case c;
      c.node = make_node("Cast", Attributes{{"to", onnx_type_id(to)}});
      c.inputs = {x};
      c.constant = {false};
      c.tolerance = {0, 0};
      c.implementation = "dnnl:cast";
      SCOPED_TRACE(std::string(to_string(from)) + " -> " + std::string(to_string(to)));
      run_family("cast", {c});
      // CastLike takes the type of its second input.
      c.node = make_node("CastLike");
      c.inputs.push_back(Tensor(to, Shape{1}));
      c.constant.push_back(true);
      run_family("castlike", {c});
    }
}

TEST(BackendConsistency, Comparisons) {
  Rng rng(base_seed() + 79);
  run_family("comparison", comparison_cases(rng));
}

TEST(BackendConsistency, Transpose) {
  Rng rng(base_seed() + 22);
  run_family("transpose", transpose_cases(rng));
}

TEST(BackendConsistency, Pooling) {
  Rng rng(base_seed() + 6);
  run_family("pooling", pooling_cases(rng));
}

TEST(BackendConsistency, Normalization) {
  Rng rng(base_seed() + 7);
  run_family("normalization", normalization_cases(rng));
}

// Every op type the dnnl backend registers is covered by a family above.
// ReduceMean/Sum/Max/Min/Prod over random axes (attribute, or ReduceSum's axes input), with and
// without keepdims, all axes when none are given.
std::vector<Case> reduction_cases(Rng& rng) {
  std::vector<Case> cases;
  const std::vector<std::string> ops = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
                                        "ReduceProd"};
  for (int k = 0; k < 40; ++k) {
    const std::string op = ops[static_cast<size_t>(k) % ops.size()];
    const ints x = rng.dims(static_cast<size_t>(rng.integer(1, 4)), 1, 9);
    const auto rank = static_cast<int64_t>(x.size());
    ints axes;
    for (int64_t d = 0; d < rank; ++d)
      if (rng.chance(0.5)) axes.push_back(rng.chance(0.5) ? d : d - rank);
    Attributes attrs;
    if (rng.chance(0.5)) attrs.set("keepdims", int64_t{0});
    Case c;
    const bool axes_input = op == "ReduceSum" && !axes.empty() && rng.chance(0.5);
    if (!axes.empty() && !axes_input) attrs.set("axes", axes);
    c.node = make_node(op, attrs);
    // Products of many values in [0.5, 1.5] stay in range; the others take [-2, 2].
    c.inputs = {op == "ReduceProd" ? rng.tensor(x, 0.5, 1.5) : rng.tensor(x, -2, 2)};
    if (axes_input)
      c.inputs.push_back(
          Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(axes.size())}, axes));
    c.constant.assign(c.inputs.size(), true);
    c.constant[0] = false;
    c.tolerance = {1e-5, 1e-5};
    c.must_accept = false;  // a reduction over only size-1 axes is a copy, left to the reference
    cases.push_back(c);
  }
  return cases;
}

// Resize, linear with half-pixel coordinates: sizes (up and down), scales (exact or rounded down,
// which the reference takes), 1-D to 3-D spatial axes.
std::vector<Case> resize_cases(Rng& rng) {
  std::vector<Case> cases;
  for (int k = 0; k < 30; ++k) {
    ints x{rng.integer(1, 2), rng.integer(1, 4)};
    const ints spatial = rng.dims(static_cast<size_t>(rng.integer(1, 3)), 1, 9);
    x.insert(x.end(), spatial.begin(), spatial.end());
    Attributes attrs;
    attrs.set("mode", std::string("linear"));
    attrs.set("coordinate_transformation_mode",
              std::string(rng.chance(0.5) ? "half_pixel" : "pytorch_half_pixel"));
    Case c;
    c.node = make_node("Resize", attrs);
    if (rng.chance(0.5)) {
      ints sizes{x[0], x[1]};
      for (size_t a = 2; a < x.size(); ++a) sizes.push_back(rng.integer(2, 17));
      c.inputs = {rng.tensor(x), Tensor(), Tensor(),
                  Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(sizes.size())}, sizes)};
    } else {
      std::vector<float> scales{1.0f, 1.0f};
      for (size_t a = 2; a < x.size(); ++a)
        scales.push_back(x[a] >= 2 ? rng.pick(std::vector<float>{0.5f, 1.5f, 2.0f, 2.5f, 3.0f})
                                   : rng.pick(std::vector<float>{2.0f, 3.0f}));
      c.inputs = {rng.tensor(x), Tensor(),
                  Tensor::from_vector<float>(Shape{static_cast<int64_t>(scales.size())}, scales)};
    }
    c.constant.assign(c.inputs.size(), true);
    c.constant[0] = false;
    c.tolerance = {1e-5, 1e-6};
    // An output axis of 1 under pytorch_half_pixel, or a scale whose product is rounded down, is
    // not oneDNN's to run (the reference does).
    c.must_accept = false;
    cases.push_back(c);
  }
  // Upsamplings between convolutions (a U-Net's to its skip's size, a segmentation head's) in
  // each activation layout, 4-D and 5-D, the output in the input's layout or another one.
  const std::vector<TensorLayout> layouts = activation_layouts();
  for (int k = 0; k < 18; ++k) {
    const TensorLayout layout = layouts[static_cast<size_t>(k) % layouts.size()];
    const TensorLayout out_layout = k % 6 == 5 ? layouts[(static_cast<size_t>(k) + 1) % 3] : layout;
    const size_t rank = k % 4 == 3 ? 5 : 4;
    const int64_t unit = layout.channel_block ? layout.channel_block : 3;
    ints x{rng.integer(1, 2), unit * rng.integer(1, 2)};
    ints sizes{x[0], x[1]};
    for (size_t a = 2; a < rank; ++a) {
      x.push_back(rng.integer(2, rank == 5 ? 5 : 9));
      sizes.push_back(x[a] * 2 + rng.integer(0, 3));
    }
    Attributes attrs;
    attrs.set("mode", std::string("linear"));
    attrs.set("coordinate_transformation_mode", std::string("half_pixel"));
    Case c;
    c.node = make_node("Resize", attrs);
    c.inputs = {rng.tensor(x), Tensor(), Tensor(),
                Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(rank)}, sizes)};
    c.constant = {false, true, true, true};
    c.input_layouts = {layout};
    c.output_layout = out_layout;
    c.tolerance = {1e-5, 1e-6};
    c.fast_implementation = true;
    cases.push_back(c);
  }
  return cases;
}

TEST(BackendConsistency, ResizeLinear) {
  Rng rng(base_seed() + 23);
  run_family("resize", resize_cases(rng));
}

// Linear and cubic Resize with the coordinate transforms oneDNN's resampling does not compute as
// ONNX does (the separable row sums of kernels/dnnl/interpolating_resize.cpp): align_corners (what
// torch exports for align_corners=True), asymmetric, tf_half_pixel_for_nn, half_pixel with cubic
// (bicubic upsampling) and its coefficient and exclude_outside, sizes or scales up and down on the
// last two axes of ranks 2 to 5; a few also resize a leading axis, which the kernel leaves to the
// reference.
std::vector<Case> interpolating_resize_cases(Rng& rng) {
  const std::vector<std::string> coordinates = {
      "align_corners", "asymmetric", "tf_half_pixel_for_nn", "half_pixel", "pytorch_half_pixel"};
  std::vector<Case> cases;
  for (int k = 0; k < 40; ++k) {
    const size_t rank = static_cast<size_t>(2 + k % 4);
    ints x = rng.dims(rank, 1, 5);
    x[rank - 1] = rng.integer(1, 20);
    x[rank - 2] = rng.integer(1, 20);
    Attributes attrs;
    const bool cubic = k % 3 == 2;
    attrs.set("mode", std::string(cubic ? "cubic" : "linear"));
    attrs.set("coordinate_transformation_mode", rng.pick(coordinates));
    if (cubic && rng.chance(0.5)) attrs.set("cubic_coeff_a", -0.75);
    if (cubic && rng.chance(0.3)) attrs.set("exclude_outside", int64_t{1});
    const bool leading = k % 10 == 9;  // a leading axis resized too: the reference's
    ints sizes = x;
    sizes[rank - 1] = rng.integer(1, 40);
    sizes[rank - 2] = rng.integer(1, 40);
    if (leading) sizes[0] = x[0] + 1;
    Case c;
    c.node = make_node("Resize", attrs);
    if (k % 2 == 0) {
      c.inputs = {rng.tensor(x), Tensor(), Tensor(),
                  Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(rank)}, sizes)};
    } else {
      std::vector<float> scales(rank, 1.f);
      for (size_t a = rank - 2; a < rank; ++a)
        scales[a] = rng.pick(std::vector<float>{0.5f, 1.5f, 2.0f, 3.0f, 4.0f});
      if (leading) scales[0] = 2.f;
      c.inputs = {rng.tensor(x), Tensor(),
                  Tensor::from_vector<float>(Shape{static_cast<int64_t>(rank)}, scales)};
    }
    c.constant.assign(c.inputs.size(), true);
    c.constant[0] = false;
    c.tolerance = {1e-5, 1e-5};
    cases.push_back(c);
  }
  // Rows that grow take the columns first (a bilinear decoder's x2 upsampling, large enough to
  // split over the team), also with the columns shrinking and with rows three times as many.
  const std::vector<std::pair<ints, ints>> grown = {{{1, 24, 56, 56}, {1, 24, 112, 112}},
                                                    {{2, 3, 10, 40}, {2, 3, 31, 17}},
                                                    {{1, 1, 9, 9}, {1, 1, 27, 27}}};
  for (size_t k = 0; k < grown.size(); ++k) {
    Attributes attrs;
    attrs.set("mode", std::string("linear"));
    attrs.set("coordinate_transformation_mode", coordinates[k % 2 == 0 ? 0 : 3]);
    Case c;
    c.node = make_node("Resize", attrs);
    c.inputs = {rng.tensor(grown[k].first), Tensor(), Tensor(),
                Tensor::from_vector<int64_t>(Shape{4}, grown[k].second)};
    c.constant = {false, true, true, true};
    c.tolerance = {1e-5, 1e-5};
    cases.push_back(c);
  }
  return cases;
}

TEST(BackendConsistency, ResizeLinearAndCubicAnyCoordinates) {
  Rng rng(base_seed() + 39);
  run_family("resize linear/cubic", interpolating_resize_cases(rng));
}

// Nearest-mode Resize (the row copies of kernels/dnnl/nearest_resize.cpp): every coordinate
// transform and rounding mode, sizes or scales up and down on any axis (batch and channels too),
// ranks 1 to 5, and tf_crop_and_resize with a roi sampling outside X (which the
// kernel hands to the reference). Exact copies: no tolerance.
std::vector<Case> nearest_resize_cases(Rng& rng) {
  const std::vector<std::string> coordinates = {"half_pixel",           "pytorch_half_pixel",
                                                "align_corners",        "asymmetric",
                                                "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  const std::vector<std::string> roundings = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                              "ceil"};
  std::vector<Case> cases;
  for (int k = 0; k < 36; ++k) {
    const ints x = rng.dims(static_cast<size_t>(1 + k % 5), 1, 7);
    const size_t rank = x.size();
    const std::string coordinate = coordinates[static_cast<size_t>(k) % coordinates.size()];
    Attributes attrs;
    attrs.set("mode", std::string("nearest"));
    attrs.set("coordinate_transformation_mode", coordinate);
    attrs.set("nearest_mode", roundings[static_cast<size_t>(k / 6) % roundings.size()]);
    if (coordinate == "tf_crop_and_resize") attrs.set("extrapolation_value", -7.0);
    Case c;
    c.node = make_node("Resize", attrs);
    const Tensor data = rng.tensor(x);
    std::vector<float> roi_values;
    for (size_t a = 0; a < rank; ++a) roi_values.push_back(static_cast<float>(rng.real(-0.3, 0.4)));
    for (size_t a = 0; a < rank; ++a) roi_values.push_back(static_cast<float>(rng.real(0.6, 1.3)));
    const Tensor roi =
        coordinate == "tf_crop_and_resize"
            ? Tensor::from_vector<float>(Shape{static_cast<int64_t>(2 * rank)}, roi_values)
            : Tensor();
    if (k % 2 == 0) {
      ints sizes;
      for (int64_t d : x) sizes.push_back(rng.integer(1, 2 * d + 3));
      c.inputs = {data, roi, Tensor(),
                  Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(rank)}, sizes)};
    } else {
      std::vector<float> scales;
      for (size_t a = 0; a < rank; ++a)
        scales.push_back(rng.pick(std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f, 3.0f}));
      c.inputs = {data, roi, Tensor::from_vector<float>(Shape{static_cast<int64_t>(rank)}, scales)};
    }
    c.constant.assign(c.inputs.size(), true);
    c.constant[0] = false;
    c.tolerance = {0.0, 0.0};
    c.implementation = "dnnl:nearest_rows";
    cases.push_back(c);
  }
  // Upsamplings between convolutions (FPN's, GhostNetV2's gates, a 3-D decoder's) in each
  // activation layout: images and channels kept, any spatial sizes. A channel scale of 1 with
  // tf_half_pixel_for_nn and a ceiling rounding still moves channels (c -> c + 1): element by
  // element in a laid-out tensor.
  const std::vector<TensorLayout> layouts = activation_layouts();
  for (int k = 0; k < 30; ++k) {
    const TensorLayout layout = layouts[static_cast<size_t>(k) % layouts.size()];
    const size_t rank = k % 5 == 4 ? 5 : 4;
    const int64_t unit = layout.channel_block ? layout.channel_block : 3;
    ints x = {rng.integer(1, 2), unit * rng.integer(1, 3)};
    for (size_t a = 2; a < rank; ++a) x.push_back(rng.integer(1, rank == 5 ? 5 : 9));
    const std::string coordinate = coordinates[static_cast<size_t>(k / 3) % 5];
    Attributes attrs;
    attrs.set("mode", std::string("nearest"));
    attrs.set("coordinate_transformation_mode", coordinate);
    const bool moves_channels = k >= 12 && k <= 14;  // tf_half_pixel_for_nn, rounded up
    attrs.set("nearest_mode",
              roundings[moves_channels ? 3 : static_cast<size_t>(rng.integer(0, 3))]);
    Case c;
    c.node = make_node("Resize", attrs);
    if (k % 2 == 0) {
      ints sizes = {x[0], x[1]};
      for (size_t a = 2; a < rank; ++a) sizes.push_back(rng.integer(1, 3 * x[a]));
      c.inputs = {rng.tensor(x), Tensor(), Tensor(),
                  Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(rank)}, sizes)};
    } else {
      std::vector<float> scales = {1.0f, 1.0f};
      for (size_t a = 2; a < rank; ++a)
        scales.push_back(x[a] > 1 ? rng.pick(std::vector<float>{0.5f, 1.0f, 2.0f, 3.0f})
                                  : rng.pick(std::vector<float>{1.0f, 2.0f, 3.0f}));
      c.inputs = {rng.tensor(x), Tensor(),
                  Tensor::from_vector<float>(Shape{static_cast<int64_t>(rank)}, scales)};
    }
    c.constant.assign(c.inputs.size(), true);
    c.constant[0] = false;
    c.input_layouts = {layout};
    c.output_layout = layout;
    c.tolerance = {0.0, 0.0};
    c.implementation = "dnnl:nearest_rows";
    cases.push_back(c);
  }
  return cases;
}

// The row copies move elements of any type: u8 data (a quantized detector's upsampling) copied
// by both backends, byte for byte.
TEST(BackendConsistency, ResizeNearestCopiesBytes) {
  Rng rng(base_seed() + 25);
  Tensor x(ElementType::u8, Shape{1, 3, 5, 4});
  for (int64_t i = 0; i < x.size(); ++i)
    x.data<uint8_t>()[i] = static_cast<uint8_t>(rng.integer(0, 255));
  Case c;
  c.node = make_node("Resize",
                     Attributes{{"mode", std::string("nearest")},
                                {"coordinate_transformation_mode", std::string("asymmetric")}});
  c.inputs = {x, Tensor(), Tensor::from_vector<float>(Shape{4}, {1.f, 1.f, 2.f, 1.5f})};
  const std::vector<const Tensor*> constants = {nullptr, nullptr, &c.inputs[2]};
  const std::vector<ValueInfo> inputs = value_infos(c.inputs, "x");
  const std::vector<ValueInfo> outputs = infer_outputs(c, inputs, constants);
  const KernelRequest request{c.node, inputs, outputs, constants};
  auto fast = KernelRegistry::instance().create_with("dnnl", request);
  auto reference = KernelRegistry::instance().create_with("reference", request);
  ASSERT_TRUE(fast && reference);
  EXPECT_EQ(fast->implementation(), "dnnl:nearest_rows");
  std::vector<Tensor> y_fast = {Tensor(ElementType::u8, outputs[0].shape)};
  std::vector<Tensor> y_reference = {Tensor(ElementType::u8, outputs[0].shape)};
  fast->execute(c.inputs, y_fast);
  reference->execute(c.inputs, y_reference);
  EXPECT_EQ(y_fast[0].to_vector<uint8_t>(), y_reference[0].to_vector<uint8_t>());
}

TEST(BackendConsistency, ResizeNearest) {
  Rng rng(base_seed() + 24);
  run_family("nearest resize", nearest_resize_cases(rng));
}

TEST(BackendConsistency, Reductions) {
  Rng rng(base_seed() + 29);
  run_family("reduction", reduction_cases(rng));
}

TEST(BackendConsistency, SliceAndPad) {
  Rng rng(base_seed() + 19);
  run_family("slice_pad", slice_pad_cases(rng));
}

TEST(BackendConsistency, Where) {
  Rng rng(base_seed() + 31);
  run_family("where", where_cases(rng));
}

TEST(BackendConsistency, Recurrent) {
  Rng rng(base_seed() + 17);
  run_family("recurrent", recurrent_cases(rng));
}

// TROUPE_RECURRENT_STEPS=0 keeps every step on one sgemm and whole-row gates: the same cases
// match the reference that way too; a malformed value is named.
TEST(BackendConsistency, RecurrentStepsOnSgemmWhenSwitchedOff) {
  {
    const test::ScopedEnv off("TROUPE_RECURRENT_STEPS", "0");
    Rng rng(base_seed() + 17);
    run_family("recurrent on sgemm", recurrent_cases(rng));
  }
  const test::ScopedEnv malformed("TROUPE_RECURRENT_STEPS", "maybe");
  Rng rng(base_seed() + 17);
  const Case c = recurrent_cases(rng).front();
  const std::vector<ValueInfo> infos = value_infos(c.inputs, "x");
  try {
    KernelRegistry::instance().create_with(
        "dnnl", KernelRequest{c.node, infos, infer_outputs(c, infos, {}), {}});
    ADD_FAILURE() << "a malformed TROUPE_RECURRENT_STEPS was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("TROUPE_RECURRENT_STEPS='maybe'"), std::string::npos)
        << e.what();
  }
}

TEST(BackendConsistency, GridSample) {
  Rng rng(base_seed() + 43);
  run_family("grid_sample", grid_sample_cases(rng));
}

TEST(BackendConsistency, RoiAlign) {
  Rng rng(base_seed() + 83);
  run_family("roi_align", roi_align_cases(rng));
}

TEST(BackendConsistency, RecurrentPrimitives) {
  Rng rng(base_seed() + 41);
  run_family("recurrent primitives (" + test::effective_isa_name() + ")",
             recurrent_primitive_cases(rng));
}

TEST(BackendConsistency, ScaledDotProductAttention) {
  Rng rng(base_seed() + 47);
  run_family("attention", attention_cases(rng));
}

TEST(BackendConsistency, ScatterElements) {
  Rng rng(base_seed() + 53);
  run_family("scatter", scatter_elements_cases(rng));
}

TEST(BackendConsistency, ScatterND) {
  Rng rng(base_seed() + 54);
  run_family("scatter_nd", scatter_nd_cases(rng));
}

// An out-of-range tuple and updates of the wrong shape fail the request naming the node and what
// is wrong, whether the slices would have been split over threads or not.
TEST(BackendConsistency, ScatterNDErrorsAreNamed) {
  for (int64_t rows : {2, 600}) {
    Attributes attrs;
    attrs.set("reduction", std::string("add"));
    const Node node = make_node("ScatterND", attrs);
    Rng rng(base_seed() + 55);
    std::vector<int64_t> values(static_cast<size_t>(rows), 1);
    values[values.size() - 2] = -8;
    for (const ints& updates : {ints{rows, 64}, ints{rows, 63}}) {
      const std::vector<Tensor> in = {rng.tensor({7, 64}),
                                      Tensor::from_vector<int64_t>(Shape{rows, 1}, values),
                                      rng.tensor(updates)};
      KernelRequest request{
          node, value_infos(in, "x"), {ValueInfo{"y", ElementType::f32, Shape{7, 64}}}};
      std::unique_ptr<Kernel> fast = KernelRegistry::instance().create_with("dnnl", request);
      ASSERT_TRUE(fast);
      std::vector<Tensor> out = {Tensor(ElementType::f32, Shape{7, 64})};
      try {
        fast->execute(in, out);
        ADD_FAILURE() << "no error for rows " << rows;
      } catch (const ExecutionError& e) {
        EXPECT_THAT(e.what(), ::testing::HasSubstr("ScatterND node 'ScatterND_under_test'"));
        EXPECT_THAT(e.what(), ::testing::HasSubstr(
                                  updates[1] == 64
                                      ? "index -8 is out of range for axis 0 of size 7"
                                      : "must have the shape [" + std::to_string(rows) + ",64]"));
      }
    }
  }
}

// An index out of range fails the request with the reference's message, naming the node, on
// one thread and on several (rows and columns split), whatever thread meets it.
TEST(BackendConsistency, ScatterOutOfRangeIndexIsNamed) {
  for (int64_t rows : {2, 600})
    for (int64_t axis : {0, 1}) {
      Attributes attrs;
      attrs.set("axis", axis);
      attrs.set("reduction", std::string("add"));
      const Node node = make_node("ScatterElements", attrs);
      const int64_t data_rows = axis == 0 ? 7 : rows;
      Rng rng(base_seed() + 59);
      std::vector<int64_t> values(static_cast<size_t>(rows * 64), 1);
      values[values.size() - 3] = axis == 0 ? 7 : -65;
      const std::vector<Tensor> in = {rng.tensor({data_rows, 64}),
                                      Tensor::from_vector<int64_t>(Shape{rows, 64}, values),
                                      rng.tensor({rows, 64})};
      const std::vector<ValueInfo> infos = value_infos(in, "x");
      KernelRequest request{node, infos, {ValueInfo{"y", ElementType::f32, Shape{data_rows, 64}}}};
      std::unique_ptr<Kernel> fast = KernelRegistry::instance().create_with("dnnl", request);
      ASSERT_TRUE(fast);
      std::vector<Tensor> out = {Tensor(ElementType::f32, Shape{data_rows, 64})};
      try {
        fast->execute(in, out);
        ADD_FAILURE() << "no error for rows " << rows << " axis " << axis;
      } catch (const ExecutionError& e) {
        EXPECT_THAT(e.what(),
                    ::testing::HasSubstr("ScatterElements node 'ScatterElements_under_test'"));
        EXPECT_THAT(e.what(), ::testing::HasSubstr(
                                  axis == 0 ? "index 7 is out of range for axis 0 of size 7"
                                            : "index -65 is out of range for axis 1 of size 64"));
      }
    }
}

TEST(BackendConsistency, GatherElements) {
  Rng rng(base_seed() + 62);
  run_family("gather_elements", gather_elements_cases(rng));
}

// An index out of range fails the request naming the node and the index, whichever thread meets
// it.
TEST(BackendConsistency, GatherElementsOutOfRangeIndexIsNamed) {
  for (int64_t rows : {2, 900}) {
    const Node node = make_node("GatherElements", Attributes{{"axis", int64_t{1}}});
    Rng rng(base_seed() + 63);
    std::vector<int64_t> values(static_cast<size_t>(rows * 64), 3);
    values[values.size() - 5] = -41;
    const std::vector<Tensor> in = {rng.tensor({rows, 40}),
                                    Tensor::from_vector<int64_t>(Shape{rows, 64}, values)};
    KernelRequest request{
        node, value_infos(in, "x"), {ValueInfo{"y", ElementType::f32, Shape{rows, 64}}}};
    std::unique_ptr<Kernel> fast = KernelRegistry::instance().create_with("dnnl", request);
    ASSERT_TRUE(fast);
    std::vector<Tensor> out = {Tensor(ElementType::f32, Shape{rows, 64})};
    try {
      fast->execute(in, out);
      ADD_FAILURE() << "no error for rows " << rows;
    } catch (const ExecutionError& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(
                                "GatherElements node 'GatherElements_under_test': index -41 is "
                                "out of range for axis 1 of size 40"));
    }
  }
}

TEST(BackendConsistency, Gather) {
  Rng rng(base_seed() + 61);
  run_family("gather", gather_cases(rng));
}

TEST(BackendConsistency, GatherOutOfRangeIndexIsNamed) {
  const Node node = make_node("Gather", Attributes{{"axis", int64_t{1}}});
  Rng rng(base_seed() + 67);
  const std::vector<Tensor> in = {rng.tensor({2, 5, 3}),
                                  Tensor::from_vector<int64_t>(Shape{3}, {0, -6, 1})};
  KernelRequest request{
      node, value_infos(in, "x"), {ValueInfo{"y", ElementType::f32, Shape{2, 3, 3}}}};
  std::unique_ptr<Kernel> fast = KernelRegistry::instance().create_with("dnnl", request);
  ASSERT_TRUE(fast);
  std::vector<Tensor> out = {Tensor(ElementType::f32, Shape{2, 3, 3})};
  try {
    fast->execute(in, out);
    ADD_FAILURE() << "no error";
  } catch (const ExecutionError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr(
                              "Gather node 'Gather_under_test': index -6 is out of range for axis "
                              "1 of size 5"));
  }
}

TEST(BackendConsistency, SinAndCos) {
  Rng rng(base_seed() + 71);
  run_family("trigonometric", trigonometric_cases(rng));
}

TEST(BackendConsistency, EveryDnnlOpIsCovered) {
  const std::vector<std::string> covered = {
      "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Abs", "Neg", "LeakyRelu", "Elu", "Softplus",
      "HardSwish", "HardSigmoid", "Gelu", "Clip", "Round", "Reciprocal", "Swish", "Mish", "Concat",
      "Add", "Sub", "Mul", "Div", "Max", "Min", "Softmax", "LogSoftmax", "MatMul", "Gemm", "Conv",
      "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "BatchNormalization",
      "LayerNormalization", "Transpose", "RNN", "GRU", "LSTM", "Slice", "Pad", "Resize", "Where",
      "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ConvTranspose", "Pow",
      "Einsum", "PRelu", "InstanceNormalization", "Expand", "Tile", "DepthToSpace", "SpaceToDepth",
      "ArgMax", "ArgMin", "LRN", "Sum", "Mean", "TopK", "ReduceL1", "ReduceL2", "ReduceSumSquare",
      "GridSample", "Split", "ScaledDotProductAttention", "ScatterElements", "Scatter", "ScatterND",
      "Gather", "GatherElements", "Sin", "Cos", "Equal", "Less", "Greater", "LessOrEqual",
      "GreaterOrEqual", "RoiAlign", "MaxUnpool", "And", "Or", "Xor", "Cast", "CastLike",
      // int8: tests/kernels/test_quantized_kernels.cpp
      "QLinearConv", "QLinearMatMul", "QuantizeLinear", "DequantizeLinear", "QLinearAdd",
      "QLinearConcat", "QLinearLookup", "QuantizingBatchNormalization"};
  const std::vector<std::string> ops = KernelRegistry::instance().op_types("dnnl");
  EXPECT_FALSE(ops.empty());
  for (const std::string& op : ops)
    EXPECT_NE(std::find(covered.begin(), covered.end(), op), covered.end())
        << op << " has dnnl kernels but no consistency cases";
}

// Shapes known only at run time: the kernel prepares at the first execute and again when the
// shapes change, and still matches the reference.
TEST(BackendConsistency, DynamicShapesPrepareLazily) {
  Rng rng(base_seed() + 8);
  struct Dyn {
    Node node;
    std::vector<Shape> declared;                       // with -1 dims
    std::vector<std::function<Tensor(int64_t)>> make;  // input for a batch size
  };
  const Tensor conv_w = rng.tensor({8, 3, 3, 3});
  const Tensor mm_b = rng.tensor({24, 16});
  const Tensor add_b = rng.tensor({7});
  const Tensor deconv_w = rng.tensor({6, 4, 2, 2});
  std::vector<Dyn> dyns = {
      {make_node("Conv", Attributes{{"pads", ints{1, 1, 1, 1}}}),
       {Shape{-1, 3, 10, 10}, Shape{8, 3, 3, 3}},
       {[&](int64_t n) {
          return rng.tensor({n, 3, 10, 10});
        },
        [&](int64_t) { return conv_w; }}},
      {make_node("MatMul"),
       {Shape{-1, 24}, Shape{24, 16}},
       {[&](int64_t n) {
          return rng.tensor({n, 24});
        },
        [&](int64_t) { return mm_b; }}},
      {make_node("Add"),
       {Shape{-1, 5, 7}, Shape{7}},
       {[&](int64_t n) {
          return rng.tensor({n, 5, 7});
        },
        [&](int64_t) { return add_b; }}},
      // A U-Net's upsampling with a dynamic batch (torchvision exports).
      {make_node("ConvTranspose", Attributes{{"strides", ints{2, 2}}}),
       {Shape{-1, 6, 5, 7}, Shape{6, 4, 2, 2}},
       {[&](int64_t n) {
          return rng.tensor({n, 6, 5, 7});
        },
        [&](int64_t) { return deconv_w; }}},
      // Rows of 32 elements (row copy), then of 8 (a reorder), then 32 again: one kernel switches.
      {make_node("Transpose", Attributes{{"perm", ints{1, 0, 2}}}),
       {Shape{2, 3, -1}},
       {[&](int64_t n) {
         return rng.tensor({2, 3, n == 2 ? 32 : 8});
       }}},
  };

  for (Dyn& d : dyns) {
    SCOPED_TRACE(d.node.op_type);
    std::vector<ValueInfo> in;
    for (size_t i = 0; i < d.declared.size(); ++i)
      in.push_back(ValueInfo{"x" + std::to_string(i), ElementType::f32, d.declared[i]});
    const OpSchema* schema = OpSchemaRegistry::instance().find(d.node.op_type);
    ASSERT_NE(schema, nullptr);
    const std::vector<ValueInfo> out = schema->infer(ShapeInferContext{d.node, in, {}});
    KernelRequest request{d.node, in, out};
    auto fast = KernelRegistry::instance().create_with("dnnl", request);
    auto reference = KernelRegistry::instance().create_with("reference", request);
    ASSERT_TRUE(fast);
    ASSERT_TRUE(reference);
    for (int64_t batch : {2, 5, 2}) {
      std::vector<Tensor> inputs;
      for (auto& f : d.make) inputs.push_back(f(batch));
      Case c;
      c.node = d.node;
      c.inputs = inputs;
      const std::vector<ValueInfo> concrete = infer_outputs(c, value_infos(inputs, "x"), {});
      std::vector<Tensor> want{Tensor(ElementType::f32, concrete[0].shape)};
      std::vector<Tensor> got{Tensor(ElementType::f32, concrete[0].shape)};
      reference->execute(inputs, want);
      fast->execute(inputs, got);
      EXPECT_EQ(compare(got[0], want[0], Tolerance{1e-4, 1e-4}), "") << "batch " << batch;
      EXPECT_EQ(fast->implementation().rfind("dnnl:", 0), 0u) << fast->implementation();
    }
  }
}

// Kernels are promised dense tensors, but a strided view (a region of a larger buffer) must not
// be misread by the dnnl kernels either: they compute on a dense copy. The reference runs on the
// dense copy directly.
TEST(BackendConsistency, StridedInputs) {
  Rng rng(base_seed() + 9);
  Tensor big = rng.tensor({6, 10});
  // Columns 2..7 of every row: shape [6, 6], row stride 10 floats.
  Tensor view(ElementType::f32, Shape{6, 6}, big.data<float>() + 2,
              {10 * static_cast<int64_t>(sizeof(float)), static_cast<int64_t>(sizeof(float))});
  ASSERT_FALSE(view.is_contiguous());
  for (const char* op : {"Relu", "Add"}) {
    SCOPED_TRACE(op);
    std::vector<Tensor> strided{view};
    if (std::string(op) == "Add") strided.push_back(rng.tensor({6}));
    std::vector<Tensor> dense;
    for (const Tensor& t : strided) dense.push_back(t.contiguous());
    const Node node = make_node(op);
    const std::vector<ValueInfo> in = value_infos(dense, "x");
    const std::vector<ValueInfo> out{ValueInfo{"y", ElementType::f32, Shape{6, 6}}};
    KernelRequest request{node, in, out};
    auto fast = KernelRegistry::instance().create_with("dnnl", request);
    auto reference = KernelRegistry::instance().create_with("reference", request);
    ASSERT_TRUE(fast);
    ASSERT_TRUE(reference);
    std::vector<Tensor> want{Tensor(ElementType::f32, Shape{6, 6})};
    std::vector<Tensor> got{Tensor(ElementType::f32, Shape{6, 6})};
    reference->execute(dense, want);
    fast->execute(strided, got);
    EXPECT_EQ(compare(got[0], want[0], Tolerance{0, 0}), "");
  }
}

// What the dnnl backend leaves to the reference kernel.
TEST(BackendConsistency, DeclinesWhatOneDnnCannotRun) {
  auto create = [](const Node& node, const std::vector<ValueInfo>& in,
                   const std::vector<ValueInfo>& out) {
    return KernelRegistry::instance().create_with("dnnl", KernelRequest{node, in, out});
  };
  const ValueInfo f(ValueInfo{"x", ElementType::f32, Shape{2, 3}});
  const ValueInfo d(ValueInfo{"x", ElementType::f64, Shape{2, 3}});
  // Another element type than f32.
  EXPECT_FALSE(create(make_node("Relu"), {d}, {d}));
  // Sub with a broadcast left operand runs (as rows, binary_broadcast_cases), and says so.
  const auto sub = create(make_node("Sub"), {ValueInfo{"a", ElementType::f32, Shape{3}}, f}, {f});
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->implementation(), "dnnl:broadcast_rows");
  // MaxPool's Indices output of 8-bit integers (plain f32 ones run on troupe's own loops).
  const ValueInfo x4{"x", ElementType::u8, Shape{1, 1, 4, 4}};
  const ValueInfo y4{"y", ElementType::u8, Shape{1, 1, 2, 2}};
  const ValueInfo idx{"i", ElementType::i64, Shape{1, 1, 2, 2}};
  EXPECT_FALSE(create(
      make_node("MaxPool", Attributes{{"kernel_shape", ints{2, 2}}, {"strides", ints{2, 2}}}, 2),
      {x4}, {y4, idx}));
  // Clip whose bound is not a constant.
  const ValueInfo scalar{"lo", ElementType::f32, Shape{}};
  EXPECT_FALSE(create(make_node("Clip"), {f, scalar}, {f}));
  // Training-mode BatchNormalization.
  EXPECT_FALSE(create(
      make_node("BatchNormalization", Attributes{{"training_mode", int64_t{1}}}),
      {f, ValueInfo{"s", ElementType::f32, Shape{3}}, ValueInfo{"b", ElementType::f32, Shape{3}},
       ValueInfo{"m", ElementType::f32, Shape{3}}, ValueInfo{"v", ElementType::f32, Shape{3}}},
      {f}));
}

}  // namespace
}  // namespace troupe
