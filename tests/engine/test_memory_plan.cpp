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
#include "troupe/properties.hpp"

namespace troupe {
namespace {

using detail::MemoryPlan;

// Runs `count` requests in flight on two streams, twice (the second round reuses the buffers the
// first wrote): feed(request, r, round) sets request r's inputs, check(request, r, round) reads its
// outputs after it completed.
template <class Feed, class Check>
void run_on_two_streams(const std::shared_ptr<Model>& model, int count, const Feed& feed,
                        const Check& check) {
  Core core;
  CompiledModel compiled = core.compile_model(
      model, "CPU", {{props::performance_mode, "THROUGHPUT"}, {props::num_streams, 2}});
  std::vector<InferRequest> requests;
  for (int r = 0; r < count; ++r) requests.push_back(compiled.create_infer_request());
  for (int round = 0; round < 2; ++round) {
    for (size_t r = 0; r < requests.size(); ++r) {
      feed(requests[r], r, round);
      requests[r].start_async();
    }
    for (size_t r = 0; r < requests.size(); ++r) {
      requests[r].wait();
      check(requests[r], r, round);
    }
  }
}

// Checks the plan's invariant: values in one buffer have disjoint [writer, last reader] ranges,
// counting a view's readers as readers of the value it views, and each buffer holds its largest
// value. Only a view shares its input's buffer.
// A Concat's parts hosted in its output occupy disjoint slices of it, inside it, aligned.
void expect_valid(const Model& model, const MemoryPlan& plan) {
  const auto& nodes = model.nodes();
  auto storage = [&](ValueId v) { return plan.storage_of[static_cast<size_t>(v)]; };
  const size_t none = model.values().size() + nodes.size();
  std::vector<size_t> first(model.values().size(), none), last(model.values().size(), 0);
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (ValueId v : nodes[n].outputs)
      if (first[storage(v)] == none) first[storage(v)] = last[storage(v)] = n;
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
      EXPECT_EQ(plan.offset_of[a] % 64, 0u);
      EXPECT_LE(plan.offset_of[a] +
                    static_cast<size_t>(info.shape.element_count()) * element_size(info.type),
                plan.offset_of[storage(a)] +
                    static_cast<size_t>(model.value(storage(a)).shape.element_count()) *
                        element_size(model.value(storage(a)).type))
          << info.name << " runs past " << model.value(storage(a)).name;
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
// DenseNet's dense block: each layer reads the join of everything before it and adds its own
// features. Every part is written once into the last join; the earlier joins are views of it.
TEST(MemoryPlan, DenseJoinsAreOneBufferWrittenOnce) {
  ModelBuilder b("dense");
  auto x = b.input("x", ElementType::f32, {1, 4, 16});
  auto x0 = b.op("Relu", {x}, {}, "x0");
  std::vector<ValueId> parts = {x0};
  std::vector<ValueId> joins;
  for (int layer = 0; layer < 3; ++layer) {
    auto joined = parts.size() == 1 ? parts[0]
                                    : b.op("Concat", parts, {{"axis", int64_t{1}}},
                                           "join" + std::to_string(layer));
    if (parts.size() > 1) joins.push_back(joined);
    auto reduced =
        b.op("ReduceMean", {joined}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}},
             "mean" + std::to_string(layer));
    auto grown = b.op("Tile",
                      {reduced, b.constant("reps" + std::to_string(layer),
                                           Tensor::from_vector<int64_t>({3}, {1, 4, 1}))},
                      {}, "grow" + std::to_string(layer));
    parts.push_back(b.op("Relu", {grown}, {}, "new" + std::to_string(layer)));
  }
  auto last = b.op("Concat", parts, {{"axis", int64_t{1}}}, "last_join");
  b.output(b.op("Sigmoid", {last}, {}, "out"), "y");
  auto model = b.build();
  const MemoryPlan plan = detail::plan_memory(*model);
  expect_valid(*model, plan);
  const size_t part_bytes = 4 * 16 * sizeof(float);
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(plan.storage_of[parts[i]], last) << "part " << i;
    EXPECT_EQ(plan.offset_of[parts[i]], i * part_bytes) << "part " << i;
  }
  for (ValueId join : joins) {
    EXPECT_EQ(plan.storage_of[join], last);
    EXPECT_EQ(plan.offset_of[join], 0u);
  }
  // The same graph with a batch of two: each part's slice is two runs, so nothing is hosted.
  ModelBuilder b2("dense2");
  auto y = b2.input("x", ElementType::f32, {2, 4, 16});
  auto y0 = b2.op("Relu", {y});
  auto y1 = b2.op("Neg", {y});
  b2.output(b2.op("Sigmoid", {b2.op("Concat", {y0, y1}, {{"axis", int64_t{1}}})}), "y");
  auto batched = b2.build();
  const MemoryPlan plan2 = detail::plan_memory(*batched);
  expect_valid(*batched, plan2);
  EXPECT_EQ(plan2.storage_of[y0], y0);
  EXPECT_EQ(plan2.storage_of[y1], y1);
}

TEST(MemoryPlan, PartsAreHostedOnlyWhereTheirSliceIsOneAlignedRun) {
  // [1, c, 4, 4]: a join of a (16 channels) and b (c channels).
  auto join_of = [](int64_t c) {
    ModelBuilder b("join");
    auto x = b.input("x", ElementType::f32, {1, 16, 4, 4});
    auto a = b.op("Relu", {x}, {}, "a");
    auto part = b.op("Slice",
                     {a, b.constant("starts", Tensor::from_vector<int64_t>({1}, {0})),
                      b.constant("ends", Tensor::from_vector<int64_t>({1}, {c})),
                      b.constant("axes", Tensor::from_vector<int64_t>({1}, {1}))},
                     {}, "b");
    auto joined = b.op("Concat", {a, part}, {{"axis", int64_t{1}}}, "join");
    b.output(b.op("Sigmoid", {joined}), "y");
    return b.build();
  };
  auto hosted = [](const Model& m, const MemoryPlan& plan, const char* name) {
    const ValueId v = *m.find_value(name);
    return plan.storage_of[v] != v;
  };
  const auto layouts_of = [](const Model& m, kernels::TensorLayout layout) {
    return std::vector<kernels::TensorLayout>(m.values().size(), layout);
  };
  auto whole_blocks = join_of(16);
  for (auto layout : {kernels::TensorLayout{}, kernels::TensorLayout::blocked(16),
                      kernels::TensorLayout::blocked(8)}) {
    const MemoryPlan plan =
        detail::plan_memory(*whole_blocks, {}, layouts_of(*whole_blocks, layout));
    expect_valid(*whole_blocks, plan);
    EXPECT_TRUE(hosted(*whole_blocks, plan, "a") && hosted(*whole_blocks, plan, "b"));
  }
  // Channels-last interleaves the parts per pixel.
  const MemoryPlan last = detail::plan_memory(
      *whole_blocks, {}, layouts_of(*whole_blocks, kernels::TensorLayout::channels_last_order()));
  EXPECT_FALSE(hosted(*whole_blocks, last, "a") || hosted(*whole_blocks, last, "b"));
  // 8 channels end inside a 16-channel block; plain, 4 channels of 4x4 floats is 64 bytes.
  auto part_block = join_of(8);
  const MemoryPlan blocked = detail::plan_memory(
      *part_block, {}, layouts_of(*part_block, kernels::TensorLayout::blocked(16)));
  EXPECT_FALSE(hosted(*part_block, blocked, "a") || hosted(*part_block, blocked, "b"));
  EXPECT_TRUE(hosted(*part_block, detail::plan_memory(*part_block), "b"));
  // A part whose slice would start off a cache line stays on its own: [1, 3, 2] floats are 24
  // bytes, so q's slice would start at byte 24.
  ModelBuilder b("unaligned");
  auto x = b.input("x", ElementType::f32, {1, 3, 2});
  auto p = b.op("Relu", {x}, {}, "p");
  auto q = b.op("Neg", {x}, {}, "q");
  b.output(b.op("Sigmoid", {b.op("Concat", {p, q}, {{"axis", int64_t{1}}})}), "y");
  auto unaligned = b.build();
  const MemoryPlan plan = detail::plan_memory(*unaligned);
  expect_valid(*unaligned, plan);
  EXPECT_TRUE(hosted(*unaligned, plan, "p"));   // at 0
  EXPECT_FALSE(hosted(*unaligned, plan, "q"));  // at 24 bytes
}

// Random joins of random parts (a part may join several joins, joins join again), all [1, c, 16]:
// joined along the channels each join is its parts' values one after the other.
TEST(MemoryPlan, RandomJoinsComputeTheSameWithPartsInPlace) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 25; ++trial) {
    ModelBuilder b("joins" + std::to_string(trial));
    std::vector<ValueId> pool = {b.input("x", ElementType::f32, {1, 2, 16})};
    std::vector<std::vector<float>> expected(1);
    for (int i = 0; i < 32; ++i) expected[0].push_back(static_cast<float>(i % 7) - 3.f);
    const int count = 5 + static_cast<int>(rng() % 14);
    for (int n = 0; n < count; ++n) {
      const std::string name = "n" + std::to_string(n);
      auto pick = [&] {
        return rng() % 3 == 0 ? rng() % pool.size()
                              : pool.size() - 1 - rng() % std::min<size_t>(pool.size(), 3);
      };
      std::vector<float> value;
      const unsigned kind = rng() % 5;
      if (kind <= 1 && pool.size() > 1) {  // a join of 2-4 parts (repeats allowed)
        std::vector<ValueId> parts;
        const size_t k = 2 + rng() % 3;
        for (size_t j = 0; j < k; ++j) {
          const size_t p = pick();
          parts.push_back(pool[p]);
          value.insert(value.end(), expected[p].begin(), expected[p].end());
        }
        if (value.size() > 16 * 64) {  // keep the channels bounded: take the first 2
          const size_t p = pick();
          pool.push_back(b.op("Relu", {pool[p]}, {}, name));
          value = expected[p];
          for (float& v : value) v = std::max(v, 0.f);
        } else {
          pool.push_back(b.op("Concat", parts, {{"axis", int64_t{1}}}, name));
        }
      } else if (kind == 2) {  // fewer channels: the first two
        const size_t p = pick();
        pool.push_back(
            b.op("Slice",
                 {pool[p], b.constant(name + "_s", Tensor::from_vector<int64_t>({1}, {0})),
                  b.constant(name + "_e", Tensor::from_vector<int64_t>({1}, {2})),
                  b.constant(name + "_a", Tensor::from_vector<int64_t>({1}, {1}))},
                 {}, name));
        value.assign(expected[p].begin(), expected[p].begin() + 32);
      } else {
        const size_t p = pick();
        pool.push_back(b.op(kind == 3 ? "Neg" : "Relu", {pool[p]}, {}, name));
        value = expected[p];
        for (float& v : value) v = kind == 3 ? -v : std::max(v, 0.f);
      }
      expected.push_back(value);
    }
    const size_t middle = pool.size() / 2;
    b.output(pool.back(), "last");
    if (middle != pool.size() - 1 && middle != 0) b.output(pool[middle], "middle");
    auto model = b.build();
    expect_valid(*model, detail::plan_memory(*model));

    run_on_two_streams(
        model, 6,
        [&](InferRequest& r, size_t, int) {
          r.set_tensor("x", Tensor::from_vector<float>({1, 2, 16}, expected[0]));
        },
        [&](InferRequest& r, size_t, int) {
          ASSERT_EQ(r.get_tensor("last").to_vector<float>(), expected.back()) << "trial " << trial;
          if (middle != pool.size() - 1 && middle != 0) {
            ASSERT_EQ(r.get_tensor("middle").to_vector<float>(), expected[middle])
                << "trial " << trial;
          }
        });
  }
}

}  // namespace troupe

namespace troupe {
namespace {

// A dense block of 3x3 convolutions (16 channels each, so whole channel blocks on every ISA):
// with one image its joins are written in place in the activation layout the convolutions
// choose; with two images nothing is in place. Both must give the same first image.
std::shared_ptr<Model> dense_block(int64_t batch) {
  ModelBuilder b("dense_block");
  auto x = b.input("x", ElementType::f32, {batch, 16, 8, 8});
  std::vector<ValueId> parts = {b.op("Relu", {x})};
  for (int layer = 0; layer < 3; ++layer) {
    const int64_t in_channels = 16 * static_cast<int64_t>(parts.size());
    auto joined = parts.size() == 1 ? parts[0] : b.op("Concat", parts, {{"axis", int64_t{1}}});
    std::vector<float> w(static_cast<size_t>(16 * in_channels * 9));
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = static_cast<float>((i * 37 + static_cast<size_t>(layer) * 11) % 19) / 19.f - 0.45f;
    auto weights = b.constant("w" + std::to_string(layer),
                              Tensor::from_vector<float>({16, in_channels, 3, 3}, w));
    auto conv = b.op(
        "Conv", {joined, weights},
        {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"kernel_shape", std::vector<int64_t>{3, 3}}});
    parts.push_back(b.op("Relu", {conv}));
  }
  b.output(b.op("Concat", parts, {{"axis", int64_t{1}}}), "y");
  return b.build();
}

TEST(ConcatInPlace, ADenseBlockOfConvolutionsComputesAsWithoutIt) {
  Core core;
  std::vector<float> x(16 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 13) / 13.f - 0.4f;
  std::vector<float> two = x;
  two.insert(two.end(), x.begin(), x.end());
  auto pair = core.compile_model(dense_block(2), "CPU").create_infer_request();
  pair.set_tensor("x", Tensor::from_vector<float>({2, 16, 8, 8}, two));
  pair.infer();
  const std::vector<float> both = pair.get_tensor("y").to_vector<float>();
  const std::vector<float> want(both.begin(), both.begin() + static_cast<long>(both.size() / 2));

  run_on_two_streams(
      dense_block(1), 8,
      [&](InferRequest& r, size_t, int) {
        r.set_tensor("x", Tensor::from_vector<float>({1, 16, 8, 8}, x));
      },
      [&](InferRequest& r, size_t, int) {
        const std::vector<float> got = r.get_tensor("y").to_vector<float>();
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 1e-4f * (1.f + std::abs(want[i]))) << "element " << i;
      });
}

}  // namespace
}  // namespace troupe

namespace troupe {
namespace {

// A Slice or Split whose parts are single runs of its input is that memory: x [1, 8, 16] cut
// along the channels. A cut along the last axis takes pieces of every row and is copied.
TEST(SliceInPlace, PartsThatAreOneRunOfTheInputAreItsMemory) {
  ModelBuilder b("cuts");
  auto x = b.input("x", ElementType::f32, {1, 8, 16});
  auto a = b.op("Relu", {x}, {}, "a");
  auto ints = [&](const std::string& name, std::vector<int64_t> v) {
    return b.constant(name, Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v));
  };
  auto upper = b.op("Slice", {a, ints("s", {4}), ints("e", {8}), ints("ax", {1})}, {}, "upper");
  auto rows = b.op("Slice", {a, ints("s2", {0}), ints("e2", {8}), ints("ax2", {2})}, {}, "rows");
  const auto parts =
      b.op_multi("Split", {a, ints("sizes", {2, 6})}, 2, {{"axis", int64_t{1}}}, "split");
  std::vector<float> xs(128);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 11) - 5.f;
  b.output(b.op("Neg", {upper}), "upper_neg");
  b.output(b.op("Neg", {rows}), "rows_neg");
  b.output(b.op("Neg", {parts[0]}), "first_neg");
  b.output(b.op("Neg", {parts[1]}), "second_neg");
  auto model = b.build();
  const MemoryPlan plan = detail::plan_memory(*model);
  expect_valid(*model, plan);
  const ValueId av = *model->find_value("a");
  EXPECT_EQ(plan.storage_of[upper], av);
  EXPECT_EQ(plan.offset_of[upper], 4u * 16 * sizeof(float));
  EXPECT_EQ(plan.storage_of[parts[0]], av);
  EXPECT_EQ(plan.offset_of[parts[0]], 0u);
  EXPECT_EQ(plan.storage_of[parts[1]], av);
  EXPECT_EQ(plan.offset_of[parts[1]], 2u * 16 * sizeof(float));
  EXPECT_EQ(plan.storage_of[rows], rows);  // 8 of every 16: copied

  run_on_two_streams(
      model, 6,
      [&](InferRequest& request, size_t r, int round) {
        std::vector<float> input = xs;
        for (float& v : input) v += static_cast<float>(r + round);
        request.set_tensor("x", Tensor::from_vector<float>({1, 8, 16}, input));
      },
      [&](InferRequest& request, size_t r, int round) {
        auto neg_relu = [&](int64_t channel, int64_t column) {
          const float v =
              xs[static_cast<size_t>(channel * 16 + column)] + static_cast<float>(r + round);
          return -std::max(v, 0.f);
        };
        const auto upper_out = request.get_tensor("upper_neg").to_vector<float>();
        const auto rows_out = request.get_tensor("rows_neg").to_vector<float>();
        const auto second = request.get_tensor("second_neg").to_vector<float>();
        for (int64_t c = 0; c < 4; ++c)
          for (int64_t j = 0; j < 16; ++j)
            ASSERT_EQ(upper_out[static_cast<size_t>(c * 16 + j)], neg_relu(c + 4, j));
        for (int64_t c = 0; c < 8; ++c)
          for (int64_t j = 0; j < 8; ++j)
            ASSERT_EQ(rows_out[static_cast<size_t>(c * 8 + j)], neg_relu(c, j));
        for (int64_t c = 0; c < 6; ++c)
          for (int64_t j = 0; j < 16; ++j)
            ASSERT_EQ(second[static_cast<size_t>(c * 16 + j)], neg_relu(c + 2, j));
      });
}

}  // namespace
}  // namespace troupe

namespace troupe {
namespace {

// torch.stack exports as Unsqueeze of each part, then Concat: the parts' producers write straight
// into their slices, and the Unsqueezes are views of them there.
TEST(ConcatInPlace, AStackWritesItsPartsBeforeTheirUnsqueezeIntoTheJoin) {
  ModelBuilder b("stack");
  auto x = b.input("x", ElementType::f32, {1, 16});
  auto axes = b.constant("axes", Tensor::from_vector<int64_t>({1}, {1}));
  std::vector<ValueId> sources, parts;
  for (int i = 0; i < 3; ++i) {
    const std::string name = "s" + std::to_string(i);
    sources.push_back(i == 0 ? b.op("Relu", {x}, {}, name)
                             : b.op("Neg", {sources.back()}, {}, name));
    parts.push_back(b.op("Unsqueeze", {sources.back(), axes}, {}, "u" + std::to_string(i)));
  }
  auto joined = b.op("Concat", parts, {{"axis", int64_t{1}}}, "stack");
  b.output(b.op("Sigmoid", {joined}), "y");
  auto model = b.build();
  const MemoryPlan plan = detail::plan_memory(*model);
  expect_valid(*model, plan);
  for (size_t i = 0; i < sources.size(); ++i) {
    EXPECT_EQ(plan.storage_of[sources[i]], joined) << i;
    EXPECT_EQ(plan.storage_of[parts[i]], joined) << i;
    EXPECT_EQ(plan.offset_of[sources[i]], i * 64) << i;
    EXPECT_EQ(plan.offset_of[parts[i]], i * 64) << i;
  }
  run_on_two_streams(
      model, 6,
      [&](InferRequest& request, size_t r, int round) {
        std::vector<float> in(16);
        for (size_t j = 0; j < in.size(); ++j)
          in[j] = static_cast<float>(j) - 7.f + static_cast<float>(r + round);
        request.set_tensor("x", Tensor::from_vector<float>({1, 16}, in));
      },
      [&](InferRequest& request, size_t r, int round) {
        const auto y = request.get_tensor("y").to_vector<float>();
        ASSERT_EQ(y.size(), 48u);
        for (size_t j = 0; j < 16; ++j) {
          const float s0 =
              std::max(static_cast<float>(j) - 7.f + static_cast<float>(r + round), 0.f);
          const float want[3] = {s0, -s0, s0};
          for (size_t i = 0; i < 3; ++i)
            ASSERT_NEAR(y[i * 16 + j], 1.f / (1.f + std::exp(-want[i])), 1e-6f) << i << " " << j;
        }
      });
}

}  // namespace
}  // namespace troupe
