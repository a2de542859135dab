// If, Loop and Scan read from ONNX and run through the public API: subgraphs that read values of
// the enclosing graphs (two levels out, through an Identity the compiler removes), loop-carried
// values and scan outputs, reversed scans, the batched Scan of opset 8 (sequence_lens, padding),
// many requests in flight, the .troupe round trip, and a subgraph reading an undefined value
// named.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "tests/serialization/onnx_test_models.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/properties.hpp"
#include "troupe/serialize.hpp"

namespace troupe {
namespace {

using namespace troupe::testing;
using ::testing::HasSubstr;

// A subgraph: its inputs (name, element type, dims) and outputs by name; nodes added by the caller.
struct Value {
  std::string name;
  int32_t type;
  std::vector<OnnxDim> dims;
};

onnx::GraphProto* graph_attribute(onnx::NodeProto* node, const std::string& attribute,
                                  const std::string& name, const std::vector<Value>& inputs,
                                  const std::vector<std::string>& outputs) {
  auto* a = node->add_attribute();
  a->set_name(attribute);
  a->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* g = a->mutable_g();
  g->set_name(name);
  for (const Value& v : inputs) onnx_value(g->mutable_input(), v.name, v.type, v.dims);
  for (const std::string& o : outputs) g->add_output()->set_name(o);
  return g;
}

onnx::NodeProto* sub_node(onnx::GraphProto* g, const std::string& op_type,
                          const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs) {
  auto* n = g->add_node();
  n->set_op_type(op_type);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

std::shared_ptr<Model> read(Core& core, TempDir& dir, const onnx::ModelProto& m) {
  return core.read_model(dir.write("model.onnx", serialize(m)).string());
}

// y = c ? k + k : -x, where k = Identity(x): the then branch reads k, the else branch x.
onnx::ModelProto if_model() {
  auto m = onnx_model(13);
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {3});
  onnx_input(m, "c", onnx::TensorProto::BOOL, {});
  onnx_node(m, "Identity", {"x"}, {"k"}, "keep");
  auto* node = onnx_node(m, "If", {"c"}, {"y"}, "choose");
  sub_node(graph_attribute(node, "then_branch", "twice", {}, {"t"}), "Add", {"k", "k"}, {"t"});
  sub_node(graph_attribute(node, "else_branch", "negate", {}, {"e"}), "Neg", {"x"}, {"e"});
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {3});
  return m;
}

// acc = x; for i < M: acc += w; scan i = (i < 1 ? w : acc before the update). The inner If reads
// w from two graphs out and acc from the loop body.
onnx::ModelProto loop_model() {
  auto m = onnx_model(13);
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {2});
  onnx_input(m, "M", onnx::TensorProto::INT64, {});
  *m.mutable_graph()->add_initializer() = onnx_raw_f32("w", {2}, {1.f, 10.f});
  auto* loop = onnx_node(m, "Loop", {"M", "", "x"}, {"final", "picked"}, "accumulate");
  auto* body = graph_attribute(loop, "body", "step",
                               {{"i", onnx::TensorProto::INT64, {}},
                                {"cond_in", onnx::TensorProto::BOOL, {}},
                                {"acc", onnx::TensorProto::FLOAT, {2}}},
                               {"cond_out", "acc_next", "choice"});
  sub_node(body, "Identity", {"cond_in"}, {"cond_out"});
  sub_node(body, "Add", {"acc", "w"}, {"acc_next"});
  *body->add_initializer() = [] {
    onnx::TensorProto one;
    one.set_name("one");
    one.set_data_type(onnx::TensorProto::INT64);
    one.add_int64_data(1);
    return one;
  }();
  sub_node(body, "Less", {"i", "one"}, {"first"});
  auto* inner = sub_node(body, "If", {"first"}, {"choice"});
  sub_node(graph_attribute(inner, "then_branch", "weights", {}, {"a"}), "Identity", {"w"}, {"a"});
  sub_node(graph_attribute(inner, "else_branch", "previous", {}, {"b"}), "Identity", {"acc"},
           {"b"});
  onnx_output(m, "final", onnx::TensorProto::FLOAT, {2});
  onnx_output(m, "picked", onnx::TensorProto::FLOAT, {"iterations", 2});
  return m;
}

// Running sums over the rows of X [3, 2], last row first; each step's sum is a scan output.
onnx::ModelProto scan_model() {
  auto m = onnx_model(11);
  onnx_input(m, "s0", onnx::TensorProto::FLOAT, {2});
  onnx_input(m, "X", onnx::TensorProto::FLOAT, {3, 2});
  auto* scan = onnx_node(m, "Scan", {"s0", "X"}, {"s", "sums"}, "running_sum");
  onnx_int_attribute(scan, "num_scan_inputs", 1);
  onnx_ints_attribute(scan, "scan_input_directions", {1});
  auto* body = graph_attribute(
      scan, "body", "add_row",
      {{"state", onnx::TensorProto::FLOAT, {2}}, {"row", onnx::TensorProto::FLOAT, {2}}},
      {"next", "out"});
  sub_node(body, "Add", {"state", "row"}, {"next"});
  sub_node(body, "Identity", {"next"}, {"out"});
  onnx_output(m, "s", onnx::TensorProto::FLOAT, {2});
  onnx_output(m, "sums", onnx::TensorProto::FLOAT, {3, 2});
  return m;
}

// Opset 8: running sums over the sequence axis of X [2, 3, 2], each batch entry from its own
// initial state; `lens` adds the input sequence_lens ([2], i64), `directions` the attribute.
onnx::ModelProto batched_scan_model(bool lens, const std::vector<int64_t>& directions = {}) {
  auto m = onnx_model(8);
  if (lens) onnx_input(m, "lens", onnx::TensorProto::INT64, {2});
  onnx_input(m, "s0", onnx::TensorProto::FLOAT, {2, 2});
  onnx_input(m, "X", onnx::TensorProto::FLOAT, {2, 3, 2});
  auto* scan =
      onnx_node(m, "Scan", {lens ? "lens" : "", "s0", "X"}, {"s", "sums"}, "batched_running_sum");
  onnx_int_attribute(scan, "num_scan_inputs", 1);
  if (!directions.empty()) onnx_ints_attribute(scan, "directions", directions);
  auto* body = graph_attribute(
      scan, "body", "add_row",
      {{"state", onnx::TensorProto::FLOAT, {2}}, {"row", onnx::TensorProto::FLOAT, {2}}},
      {"next", "out"});
  sub_node(body, "Add", {"state", "row"}, {"next"});
  sub_node(body, "Identity", {"next"}, {"out"});
  onnx_output(m, "s", onnx::TensorProto::FLOAT, {2, 2});
  onnx_output(m, "sums", onnx::TensorProto::FLOAT, {2, 3, 2});
  return m;
}

// Entry 0 starts from (0, 0) over rows (1, 2), (3, 4), (5, 6); entry 1 from (100, 200) over
// (10, 20), (30, 40), (50, 60).
void set_batched_scan_inputs(InferRequest& request) {
  request.set_tensor("s0", Tensor::from_vector<float>({2, 2}, {0, 0, 100, 200}));
  request.set_tensor(
      "X", Tensor::from_vector<float>({2, 3, 2}, {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60}));
}

Tensor scalar_bool(bool v) {
  Tensor t(ElementType::boolean, Shape{});
  t.data<bool>()[0] = v;
  return t;
}

void run_loop(InferRequest& request, int64_t m) {
  request.set_tensor("x", Tensor::from_vector<float>({2}, {0.f, 0.f}));
  request.set_tensor("M", Tensor::from_vector<int64_t>(Shape{}, {m}));
  request.infer();
}

// After M iterations from 0: final = M * w; picked = w, then the accumulator before each update.
void expect_loop(InferRequest& request, int64_t m) {
  const auto f = static_cast<float>(m);
  EXPECT_EQ(request.get_tensor("final").to_vector<float>(), (std::vector<float>{f, 10 * f}));
  std::vector<float> picked;
  for (int64_t i = 0; i < m; ++i) {
    const auto before = static_cast<float>(i == 0 ? 1 : i);  // w, then i * w
    picked.insert(picked.end(), {before, 10 * before});
  }
  EXPECT_EQ(request.get_tensor("picked").shape(), (Shape{m, 2}));
  EXPECT_EQ(request.get_tensor("picked").to_vector<float>(), picked);
}

TEST(OnnxControlFlow, IfRunsTheBranchTheConditionChooses) {
  Core core;
  TempDir dir;
  auto compiled = core.compile_model(read(core, dir, if_model()), "CPU");
  auto request = compiled.create_infer_request();
  request.set_tensor("x", Tensor::from_vector<float>({3}, {1.f, -2.f, 3.f}));
  request.set_tensor("c", scalar_bool(true));
  request.infer();
  EXPECT_EQ(request.get_tensor("y").to_vector<float>(), (std::vector<float>{2.f, -4.f, 6.f}));
  request.set_tensor("c", scalar_bool(false));
  request.infer();
  EXPECT_EQ(request.get_tensor("y").to_vector<float>(), (std::vector<float>{-1.f, 2.f, -3.f}));
}

// torch's export of squeeze(1) where its tracer did not know the dimension: If(Shape(x)[1] == 1,
// Squeeze(x, 1), Identity(x)), then Relu. The shapes are static, so the condition folds and the
// branch taken replaces the If: the runtime model has no If, and the graph is planned like any
// static one (its Relu a oneDNN kernel, not chosen per run).
onnx::ModelProto shape_tested_squeeze_model(int64_t middle) {
  auto m = onnx_model(13);
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {2, middle, 3});
  onnx::TensorProto index;
  index.set_name("index");
  index.set_data_type(onnx::TensorProto::INT64);
  index.add_int64_data(1);
  *m.mutable_graph()->add_initializer() = index;
  onnx::TensorProto one = index;
  one.set_name("one");
  one.add_dims(1);
  *m.mutable_graph()->add_initializer() = one;
  onnx_node(m, "Shape", {"x"}, {"shape"}, "shape");
  onnx_node(m, "Gather", {"shape", "index"}, {"dim"}, "dim");
  onnx_node(m, "Equal", {"dim", "one"}, {"is_one"}, "is_one");
  auto* node = onnx_node(m, "If", {"is_one"}, {"squeezed"}, "squeeze_if_one");
  sub_node(graph_attribute(node, "then_branch", "squeeze", {}, {"s"}), "Squeeze", {"x", "one"},
           {"s"});
  sub_node(graph_attribute(node, "else_branch", "keep", {}, {"k"}), "Identity", {"x"}, {"k"});
  onnx_node(m, "Relu", {"squeezed"}, {"y"}, "relu");
  if (middle == 1)
    onnx_output(m, "y", onnx::TensorProto::FLOAT, {2, 3});
  else
    onnx_output(m, "y", onnx::TensorProto::FLOAT, {2, middle, 3});
  return m;
}

TEST(OnnxControlFlow, AnIfOnAShapeKnownAtCompileTimeIsItsBranch) {
  for (int64_t middle : {1, 2}) {
    SCOPED_TRACE("middle dimension " + std::to_string(middle));
    Core core;
    TempDir dir;
    auto compiled = core.compile_model(read(core, dir, shape_tested_squeeze_model(middle)), "CPU");
    std::vector<float> x(static_cast<size_t>(6 * middle)), expected;
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 5) - 2.f;
    for (float v : x) expected.push_back(v > 0.f ? v : 0.f);
    auto request = compiled.create_infer_request();
    request.set_tensor("x", Tensor::from_vector<float>({2, middle, 3}, x));
    request.infer();
    const Tensor y = request.get_tensor("y");
    EXPECT_EQ(y.shape(), middle == 1 ? Shape({2, 3}) : Shape({2, middle, 3}));
    EXPECT_EQ(y.to_vector<float>(), expected);
    // A dynamic graph's nodes read "dynamic" before a run and "data-dependent" after.
    const auto runtime = compiled.runtime_model();
    for (const Node& node : runtime->nodes()) {
      EXPECT_NE(node.op_type, "If") << node.name;
      const std::string implementation = node.attributes.get_string_or("implementation", "");
      EXPECT_NE(implementation, "dynamic") << node.name;
      EXPECT_NE(implementation, "data-dependent") << node.name;
    }
  }
}

TEST(OnnxControlFlow, LoopCarriesValuesAndStacksScanOutputs) {
  Core core;
  TempDir dir;
  auto compiled = core.compile_model(read(core, dir, loop_model()), "CPU");
  auto request = compiled.create_infer_request();
  for (int64_t m : {3, 1, 0, 5}) {
    run_loop(request, m);
    expect_loop(request, m);
  }
}

TEST(OnnxControlFlow, ScanInReverse) {
  Core core;
  TempDir dir;
  auto compiled = core.compile_model(read(core, dir, scan_model()), "CPU");
  auto request = compiled.create_infer_request();
  request.set_tensor("s0", Tensor::from_vector<float>({2}, {0.f, 0.f}));
  request.set_tensor("X", Tensor::from_vector<float>({3, 2}, {1, 2, 3, 4, 5, 6}));
  request.infer();
  EXPECT_EQ(request.get_tensor("s").to_vector<float>(), (std::vector<float>{9, 12}));
  EXPECT_EQ(request.get_tensor("sums").to_vector<float>(),
            (std::vector<float>{5, 6, 8, 10, 9, 12}));
}

TEST(OnnxControlFlow, Scan8ScansEachBatchEntryFromItsOwnState) {
  Core core;
  TempDir dir;
  auto model = read(core, dir, batched_scan_model(false));
  EXPECT_EQ(model->nodes().at(0).attributes.get_int("opset"), 8);
  auto request = core.compile_model(model, "CPU").create_infer_request();
  set_batched_scan_inputs(request);
  request.infer();
  EXPECT_EQ(request.get_tensor("s").to_vector<float>(), (std::vector<float>{9, 12, 190, 320}));
  EXPECT_EQ(request.get_tensor("sums").shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(request.get_tensor("sums").to_vector<float>(),
            (std::vector<float>{1, 2, 4, 6, 9, 12, 110, 220, 140, 260, 190, 320}));
}

TEST(OnnxControlFlow, Scan8HonoursSequenceLensAndPadsWithZeros) {
  Core core;
  TempDir dir;
  auto request =
      core.compile_model(read(core, dir, batched_scan_model(true)), "CPU").create_infer_request();
  set_batched_scan_inputs(request);
  // Entry 0 stops after two steps, entry 1 runs none: its state stays, its sums are all padding.
  request.set_tensor("lens", Tensor::from_vector<int64_t>({2}, {2, 0}));
  request.infer();
  EXPECT_EQ(request.get_tensor("s").to_vector<float>(), (std::vector<float>{4, 6, 100, 200}));
  EXPECT_EQ(request.get_tensor("sums").to_vector<float>(),
            (std::vector<float>{1, 2, 4, 6, 0, 0, 0, 0, 0, 0, 0, 0}));
  request.set_tensor("lens", Tensor::from_vector<int64_t>({2}, {3, 4}));
  try {
    request.infer();
    ADD_FAILURE() << "expected an ExecutionError";
  } catch (const ExecutionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Scan node 'batched_running_sum'"));
    EXPECT_THAT(e.what(), HasSubstr("sequence_lens[1] is 4, outside [0, 3]"));
  }
}

TEST(OnnxControlFlow, Scan8ReversesWithinEachEntrysOwnLength) {
  Core core;
  TempDir dir;
  auto request = core.compile_model(read(core, dir, batched_scan_model(true, {1})), "CPU")
                     .create_infer_request();
  set_batched_scan_inputs(request);
  // Entry 0 runs rows 2, 1, 0; entry 1 (length 2) rows 1, 0, then one step of padding.
  request.set_tensor("lens", Tensor::from_vector<int64_t>({2}, {3, 2}));
  request.infer();
  EXPECT_EQ(request.get_tensor("s").to_vector<float>(), (std::vector<float>{9, 12, 140, 260}));
  EXPECT_EQ(request.get_tensor("sums").to_vector<float>(),
            (std::vector<float>{5, 6, 8, 10, 9, 12, 130, 240, 140, 260, 0, 0}));
}

TEST(OnnxControlFlow, Scan8BadAttributesAndInputsAreNamed) {
  Core core;
  TempDir dir;
  const auto expect_refused = [&](const onnx::ModelProto& m, const std::string& what) {
    try {
      read(core, dir, m);
      ADD_FAILURE() << "expected a ModelError saying " << what;
    } catch (const ModelError& e) {
      EXPECT_THAT(e.what(), HasSubstr("Scan node 'batched_running_sum'"));
      EXPECT_THAT(e.what(), HasSubstr(what));
    }
  };
  expect_refused(batched_scan_model(false, {2}),
                 "attribute 'directions' has the entry 2, expected 0 or 1");
  expect_refused(batched_scan_model(false, {0, 1}), "attribute 'directions' has 2 entries");
  auto longer = batched_scan_model(true);
  *longer.mutable_graph()->add_initializer() = [] {
    onnx::TensorProto lens;
    lens.set_name("lens");
    lens.set_data_type(onnx::TensorProto::INT64);
    lens.add_dims(2);
    lens.add_int64_data(1);
    lens.add_int64_data(5);
    return lens;
  }();
  longer.mutable_graph()->mutable_input()->erase(longer.mutable_graph()->mutable_input()->begin());
  expect_refused(longer, "'sequence_lens' holds 5, outside [0, 3]");
  // A state of 3 entries against scan inputs of 2.
  auto mismatched = batched_scan_model(false);
  mismatched.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_value(3);
  expect_refused(mismatched,
                 "has shape [3,2], whose batch size 3 differs from the other inputs' 2");
}

TEST(OnnxControlFlow, ManyLoopsInFlightFromSeveralThreads) {
  Core core;
  TempDir dir;
  auto compiled =
      core.compile_model(read(core, dir, loop_model()), "CPU",
                         {{props::performance_mode, "THROUGHPUT"}, {props::num_streams, 2}});
  constexpr int threads = 3, per_thread = 8, rounds = 3;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::vector<InferRequest> requests;
      for (int i = 0; i < per_thread; ++i) requests.push_back(compiled.create_infer_request());
      for (int r = 0; r < rounds; ++r) {
        for (int i = 0; i < per_thread; ++i) {
          auto& request = requests[static_cast<size_t>(i)];
          request.set_tensor("x", Tensor::from_vector<float>({2}, {0.f, 0.f}));
          request.set_tensor("M", Tensor::from_vector<int64_t>(Shape{}, {(t + i + r) % 5}));
          request.start_async();
        }
        for (int i = 0; i < per_thread; ++i) {
          requests[static_cast<size_t>(i)].wait();
          expect_loop(requests[static_cast<size_t>(i)], (t + i + r) % 5);
        }
      }
    });
  for (auto& w : workers) w.join();
}

TEST(OnnxControlFlow, SubgraphsSurviveTheTroupeFormat) {
  Core core;
  TempDir dir;
  auto model = read(core, dir, loop_model());
  const std::string path = (dir.path() / "loop.troupe").string();
  save_model(model, path);
  auto compiled = core.compile_model(core.read_model(path), "CPU");
  auto request = compiled.create_infer_request();
  run_loop(request, 4);
  expect_loop(request, 4);
}

TEST(OnnxControlFlow, ASubgraphReadingAnUndefinedValueIsNamed) {
  Core core;
  TempDir dir;
  auto m = if_model();
  auto* then_branch = m.mutable_graph()->mutable_node(1)->mutable_attribute(0)->mutable_g();
  then_branch->mutable_node(0)->set_input(1, "nowhere");
  try {
    read(core, dir, m);
    ADD_FAILURE() << "expected a ModelError";
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'nowhere'"));
  }
}

}  // namespace
}  // namespace troupe
