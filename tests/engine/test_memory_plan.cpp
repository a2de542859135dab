// Memory planning (engine/graph/memory_plan): intermediate values share buffers only when their
// lifetimes do not overlap, a node never writes into its own inputs, and models still compute the
// right values with the shared buffers (random element-wise DAGs checked against values computed
// here).

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "engine/graph/memory_plan.hpp"
#include "troupe/core.hpp"
#include "troupe/model_builder.hpp"

namespace troupe {
namespace {

using detail::MemoryPlan;

// Checks the plan's invariant: values in one buffer have disjoint [writer, last reader] ranges,
// counting a view's readers as readers of the value it views, and each buffer holds its largest
// value. Only a view shares its input's buffer.
void expect_valid(const Model& model, const MemoryPlan& plan) {
  const auto& nodes = model.nodes();
  auto storage = [&](ValueId v) { return plan.storage_of[static_cast<size_t>(v)]; };
  std::vector<size_t> first(model.values().size(), 0), last(model.values().size(), 0);
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (ValueId v : nodes[n].outputs)
      if (storage(v) == v) first[v] = last[v] = n;
    for (ValueId v : nodes[n].inputs)
      if (v != no_value) last[storage(v)] = std::max(last[storage(v)], n);
    for (ValueId v : nodes[n].outputs) last[storage(v)] = std::max(last[storage(v)], n);
  }
  for (size_t n = 0; n < nodes.size(); ++n)
    for (ValueId out : nodes[n].outputs)
      for (ValueId in : nodes[n].inputs)
        if (in != no_value && plan.buffer_of[out] != MemoryPlan::unplanned &&
            storage(out) != storage(in)) {
          EXPECT_NE(plan.buffer_of[out], plan.buffer_of[in]) << "node " << nodes[n].name;
        }
  for (ValueId a = 0; a < static_cast<ValueId>(plan.buffer_of.size()); ++a) {
    if (plan.buffer_of[a] == MemoryPlan::unplanned) continue;
    const ValueInfo& info = model.value(a);
    EXPECT_GE(plan.buffer_bytes[static_cast<size_t>(plan.buffer_of[a])],
              static_cast<size_t>(info.shape.element_count()) * element_size(info.type));
    if (storage(a) != a) {
      EXPECT_EQ(plan.buffer_of[a], plan.buffer_of[storage(a)]);
      continue;
    }
    for (ValueId b = a + 1; b < static_cast<ValueId>(plan.buffer_of.size()); ++b)
      if (storage(b) == b && plan.buffer_of[a] == plan.buffer_of[b]) {
        EXPECT_TRUE(last[a] < first[b] || last[b] < first[a])
            << model.value(a).name << " and " << model.value(b).name << " overlap";
      }
  }
}

TEST(MemoryPlan, ChainNeedsTwoBuffers) {
  ModelBuilder b("chain");
  auto v = b.input("x", ElementType::f32, {1, 256});
  for (int i = 0; i < 6; ++i) v = b.op("Relu", {v}, {}, "relu" + std::to_string(i));
  b.output(v, "y");
  auto model = b.build();
  const MemoryPlan plan = detail::plan_memory(*model);
  expect_valid(*model, plan);
  EXPECT_EQ(plan.buffer_bytes.size(), 2u);
  EXPECT_EQ(plan.total_bytes(), 2u * 256 * 4);
  EXPECT_EQ(plan.unshared_bytes, 5u * 256 * 4);  // the last Relu writes the model output
  // Model inputs and outputs belong to the caller.
  EXPECT_EQ(plan.buffer_of[model->inputs()[0]], MemoryPlan::unplanned);
  EXPECT_EQ(plan.buffer_of[model->outputs()[0]], MemoryPlan::unplanned);
}

// A value stored in another type than its own (bf16 between bf16 kernels) is planned at that
// type's size: the chain's two buffers hold 256 bf16 elements each.
TEST(MemoryPlan, ValuesStoredAsBf16TakeTheirBf16Size) {
  ModelBuilder b("chain");
  auto v = b.input("x", ElementType::f32, {1, 256});
  for (int i = 0; i < 4; ++i) v = b.op("Relu", {v}, {}, "relu" + std::to_string(i));
  b.output(v, "y");
  auto model = b.build();
  std::vector<ElementType> stored;
  for (const ValueInfo& info : model->values()) stored.push_back(info.type);
  for (const Node& node : model->nodes())
    if (node.outputs[0] != model->outputs()[0]) stored[node.outputs[0]] = ElementType::bf16;
  const MemoryPlan plan = detail::plan_memory(*model, stored);
  EXPECT_EQ(plan.buffer_bytes.size(), 2u);
  EXPECT_EQ(plan.total_bytes(), 2u * 256 * 2);
  EXPECT_EQ(plan.unshared_bytes, 3u * 256 * 2);
  EXPECT_EQ(detail::plan_memory(*model).total_bytes(), 2u * 256 * 4);
}

// A Reshape's output is its input's memory, and that memory lives until the view's last reader:
// `negated` is written after `relu`'s last direct reader, yet must not land in its buffer.
TEST(MemoryPlan, AViewSharesItsInputsBufferAndKeepsItAlive) {
  ModelBuilder b("views");
  auto x = b.input("x", ElementType::f32, {256});
  auto square = b.constant("square", Tensor::from_vector<int64_t>({2}, {16, 16}));
  auto relu = b.op("Relu", {x}, {}, "relu");
  auto relu_view = b.op("Reshape", {relu, square}, {}, "relu_view");
  auto negated = b.op("Neg", {x}, {}, "negated");
  auto negated_view = b.op("Reshape", {negated, square}, {}, "negated_view");
  b.output(b.op("Add", {relu_view, negated_view}, {}, "sum"), "y");
  auto model = b.build();
  const MemoryPlan plan = detail::plan_memory(*model);
  expect_valid(*model, plan);
  EXPECT_EQ(plan.storage_of[relu_view], relu);
  EXPECT_EQ(plan.buffer_of[relu_view], plan.buffer_of[relu]);
  EXPECT_NE(plan.buffer_of[negated], plan.buffer_of[relu]);
  EXPECT_EQ(plan.buffer_bytes.size(), 2u);
  EXPECT_EQ(plan.unshared_bytes, 2u * 256 * 4);

  Core core;
  InferRequest request = core.compile_model(model, "CPU").create_infer_request();
  std::vector<float> input(256);
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i) - 100.f;
  request.set_tensor("x", Tensor::from_vector<float>({256}, input));
  request.infer();
  const std::vector<float> y = request.get_tensor("y").to_vector<float>();
  ASSERT_EQ(y.size(), 256u);
  for (size_t i = 0; i < y.size(); ++i)  // relu(v) - v
    EXPECT_FLOAT_EQ(y[i], std::max(input[i], 0.f) - input[i]) << i;
}

// A view of a view shares the first value's buffer; a view that is a model output is the caller's
// tensor, so it is copied, and the value it views stays in its own buffer.
TEST(MemoryPlan, ChainsOfViewsShareOneBufferAndOutputsAreCopied) {
  ModelBuilder b("view_chains");
  auto x = b.input("x", ElementType::f32, {2, 8});
  auto relu = b.op("Relu", {x}, {}, "relu");
  auto flat = b.op("Flatten", {relu}, {{"axis", int64_t{0}}}, "flat");
  auto back =
      b.op("Reshape", {flat, b.constant("shape", Tensor::from_vector<int64_t>({2}, {4, 4}))}, {},
           "back");
  auto neg = b.op("Neg", {back}, {}, "neg");
  b.output(neg, "negated");
  b.output(b.op("Identity", {relu}, {}, "same"), "identity");
  auto model = b.build();
  const MemoryPlan plan = detail::plan_memory(*model);
  expect_valid(*model, plan);
  EXPECT_EQ(plan.storage_of[back], relu);
  EXPECT_EQ(plan.buffer_of[back], plan.buffer_of[relu]);
  EXPECT_EQ(plan.buffer_of[model->outputs()[1]], MemoryPlan::unplanned);

  Core core;
  InferRequest request = core.compile_model(model, "CPU").create_infer_request();
  std::vector<float> input(16);
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i) - 7.5f;
  request.set_tensor("x", Tensor::from_vector<float>({2, 8}, input));
  for (int run = 0; run < 2; ++run) {
    request.infer();
    const auto negated = request.get_tensor("negated").to_vector<float>();
    const auto identity = request.get_tensor("identity").to_vector<float>();
    for (size_t i = 0; i < input.size(); ++i) {
      EXPECT_FLOAT_EQ(identity[i], std::max(input[i], 0.f)) << i;
      EXPECT_FLOAT_EQ(negated[i], -std::max(input[i], 0.f)) << i;
    }
  }
}

// A view of a model input keeps a buffer of its own (the caller's tensor is not planned).
TEST(MemoryPlan, AViewOfAModelInputHasABufferOfItsOwn) {
  ModelBuilder b("not_views");
  auto x = b.input("x", ElementType::f32, {4, 8});
  auto flat = b.op("Flatten", {x}, {{"axis", int64_t{0}}}, "flat");
  auto relu = b.op("Relu", {flat}, {}, "relu");
  b.output(b.op("Neg", {relu}, {}, "neg"), "y");
  auto model = b.build();
  const MemoryPlan plan = detail::plan_memory(*model);
  expect_valid(*model, plan);
  EXPECT_EQ(plan.storage_of[flat], flat);
  EXPECT_NE(plan.buffer_of[flat], MemoryPlan::unplanned);
  EXPECT_NE(plan.buffer_of[flat], plan.buffer_of[relu]);
}

TEST(MemoryPlan, GrowsAFreeBufferForALargerValue) {
  ModelBuilder b("grow");
  auto x = b.input("x", ElementType::f32, {1, 4});
  auto small = b.op("Relu", {x}, {}, "small");
  auto big = b.op("Tile", {small, b.constant("reps", Tensor::from_vector<int64_t>({2}, {1, 64}))},
                  {}, "big");
  auto bigger = b.op("Relu", {big}, {}, "bigger");
  b.output(b.op("ReduceSum", {bigger}, {{"keepdims", int64_t{0}}}, "sum"), "y");
  auto model = b.build();
  const MemoryPlan plan = detail::plan_memory(*model);
  expect_valid(*model, plan);
  EXPECT_EQ(plan.buffer_bytes.size(), 2u);
}

// A random DAG of element-wise ops over [8] vectors; the test evaluates it itself.
TEST(MemoryPlan, RandomGraphsComputeTheSameWithSharedBuffers) {
  std::mt19937 rng(5);
  Core core;
  for (int trial = 0; trial < 20; ++trial) {
    ModelBuilder b("dag" + std::to_string(trial));
    std::vector<ValueId> pool = {b.input("x", ElementType::f32, {8})};
    std::vector<std::vector<float>> expected = {{}};
    std::vector<float> x(8);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 3.5f;
    expected[0] = x;
    const int count = 4 + static_cast<int>(rng() % 12);
    for (int n = 0; n < count; ++n) {
      // Mostly recent values, sometimes an old one, so lifetimes vary.
      auto pick = [&]() -> size_t {
        const size_t recent = std::min<size_t>(pool.size(), 3);
        return rng() % 4 == 0 ? rng() % pool.size() : pool.size() - 1 - rng() % recent;
      };
      const size_t a = pick();
      const size_t c = pick();
      const std::string name = "n" + std::to_string(n);
      std::vector<float> value(8);
      switch (rng() % 4) {
        case 3:  // a view: shares its input's buffer and extends its lifetime
          pool.push_back(
              b.op("Reshape",
                   {pool[a], b.constant(name + "_shape", Tensor::from_vector<int64_t>({1}, {8}))},
                   {}, name));
          value = expected[a];
          break;
        case 0:
          pool.push_back(b.op("Add", {pool[a], pool[c]}, {}, name));
          for (size_t i = 0; i < 8; ++i) value[i] = expected[a][i] + expected[c][i];
          break;
        case 1:
          pool.push_back(b.op("Mul", {pool[a], pool[c]}, {}, name));
          for (size_t i = 0; i < 8; ++i) value[i] = expected[a][i] * expected[c][i] * 0.5f;
          pool.back() = b.op(
              "Mul",
              {pool.back(), b.constant(name + "_half", Tensor::from_vector<float>({1}, {0.5f}))},
              {}, name + "_scaled");
          break;
        default:
          pool.push_back(b.op("Relu", {pool[a]}, {}, name));
          for (size_t i = 0; i < 8; ++i) value[i] = std::max(expected[a][i], 0.f);
      }
      expected.push_back(value);
    }
    // Two outputs: the last value and one from the middle.
    const size_t middle = pool.size() / 2;
    b.output(pool.back(), "last");
    if (middle != pool.size() - 1 && middle != 0) b.output(pool[middle], "middle");
    auto model = b.build();
    expect_valid(*model, detail::plan_memory(*model));

    CompiledModel compiled = core.compile_model(model, "CPU");
    InferRequest request = compiled.create_infer_request();
    request.set_tensor("x", Tensor::from_vector<float>({8}, x));
    for (int run = 0; run < 2; ++run) {  // the second run reuses buffers written by the first
      request.infer();
      const auto last = request.get_tensor("last").to_vector<float>();
      for (size_t i = 0; i < 8; ++i)
        ASSERT_FLOAT_EQ(last[i], expected.back()[i]) << "trial " << trial << " element " << i;
      if (middle != pool.size() - 1 && middle != 0) {
        const auto mid = request.get_tensor("middle").to_vector<float>();
        for (size_t i = 0; i < 8; ++i)
          ASSERT_FLOAT_EQ(mid[i], expected[middle][i]) << "trial " << trial << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace troupe
