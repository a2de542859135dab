// Models whose intermediate and output shapes depend on the data (NonZero, Compress): every
// request gets outputs sized by its own values, with many requests in flight on several streams,
// and such a model never merges requests into batches.

#include <gmock/gmock.h>

#include <thread>

#include "pipeline_fixture.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

// indices = NonZero(Relu(x)) [1, ?]; doubled = 2 * Relu(x)[indices]: the positive values of x,
// doubled, and where they are.
std::shared_ptr<Model> positives_model() {
  ModelBuilder b("positives");
  auto x = b.input("x", ElementType::f32, {8});
  auto relu = b.op("Relu", {x});
  auto where = b.op("NonZero", {relu}, {}, "nonzero");
  auto flat = b.op("Reshape", {where, b.constant("flat", Tensor::from_vector<int64_t>({1}, {-1}))});
  auto picked = b.op("Gather", {relu, flat});
  auto doubled = b.op(
      "Mul", {picked, b.constant("two", Tensor::from_vector<float>({1}, std::vector<float>{2}))});
  b.output(where, "indices");
  b.output(doubled, "doubled");
  return b.build();
}

std::vector<float> input_values(int seed) {
  std::vector<float> v(8);
  for (int i = 0; i < 8; ++i) v[static_cast<size_t>(i)] = ((seed * 7 + i * 3) % 5) - 2.f;
  return v;
}

void expect_positives(const std::vector<float>& x, InferRequest& request) {
  std::vector<int64_t> indices;
  std::vector<float> doubled;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] > 0) {
      indices.push_back(static_cast<int64_t>(i));
      doubled.push_back(2 * x[i]);
    }
  const Tensor where = request.get_tensor("indices");
  EXPECT_EQ(where.shape(), (Shape{1, static_cast<int64_t>(indices.size())}));
  EXPECT_EQ(where.to_vector<int64_t>(), indices);
  const Tensor values = request.get_tensor("doubled");
  EXPECT_EQ(values.shape(), (Shape{static_cast<int64_t>(doubled.size())}));
  EXPECT_EQ(values.to_vector<float>(), doubled);
}

}  // namespace

TEST(DataDependentShapes, EachRequestsOutputsHaveTheSizeItsDataGives) {
  Core core;
  auto compiled = core.compile_model(positives_model(), "CPU");
  EXPECT_EQ(compiled.outputs()[0].shape.to_string(), "[1,?]");
  auto request = compiled.create_infer_request();
  const std::vector<std::vector<float>> inputs = {
      {1, -1, 2, -2, 3, -3, 4, -4},
      std::vector<float>(8, -1.f),  // nothing selected: empty outputs
      std::vector<float>(8, 5.f),   // everything
      {1, -1, 2, -2, 3, -3, 4, -4}};
  for (const auto& x : inputs) {
    request.set_tensor("x", Tensor::from_vector<float>({8}, x));
    request.infer();
    expect_positives(x, request);
  }
}

TEST(DataDependentShapes, ManyRequestsInFlightFromSeveralThreads) {
  Core core;
  auto compiled = core.compile_model(
      positives_model(), "CPU", {{props::performance_mode, "THROUGHPUT"}, {props::num_streams, 2}});
  constexpr int threads = 3, per_thread = 12, rounds = 4;
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::vector<InferRequest> requests;
      std::vector<std::vector<float>> inputs;
      for (int i = 0; i < per_thread; ++i) {
        requests.push_back(compiled.create_infer_request());
        requests.back().set_callback([&](std::exception_ptr e) {
          if (e) ++failures;
        });
      }
      for (int r = 0; r < rounds; ++r) {
        inputs.clear();
        for (int i = 0; i < per_thread; ++i) {
          inputs.push_back(input_values(t * 100 + r * 10 + i));
          requests[static_cast<size_t>(i)].set_tensor(
              "x", Tensor::from_vector<float>({8}, inputs.back()));
        }
        for (auto& request : requests) request.start_async();
        for (int i = 0; i < per_thread; ++i) {
          requests[static_cast<size_t>(i)].wait();
          expect_positives(inputs[static_cast<size_t>(i)], requests[static_cast<size_t>(i)]);
        }
      }
    });
  for (auto& w : workers) w.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(DataDependentShapes, AModelThatCompressesItsBatchIsNeverBatched) {
  // Rows of x whose sum is positive: the output's leading dimension is dynamic like the input's,
  // but it counts selected rows, not requests.
  ModelBuilder b("positive_rows");
  auto x = b.input("x", ElementType::f32, {Shape::dynamic, 2});
  auto sums = b.op("ReduceSum", {x, b.constant("axes", Tensor::from_vector<int64_t>({1}, {1}))},
                   {{"keepdims", int64_t{0}}});
  auto keep =
      b.op("Greater",
           {sums, b.constant("zero", Tensor::from_vector<float>({1}, std::vector<float>{0}))});
  b.output(b.op("Compress", {x, keep}, {{"axis", int64_t{0}}}), "y");
  Core core;
  auto compiled = core.compile_model(b.build(), "CPU", {{props::auto_batch_max_size, 8}});
  EXPECT_EQ(compiled.get_property(props::auto_batch_max_size).as_int(), 1);
  std::vector<InferRequest> requests;
  for (int i = 0; i < 8; ++i) {
    requests.push_back(compiled.create_infer_request());
    // Request i has i + 1 rows; rows 0, 2, 4, ... are positive.
    std::vector<float> rows;
    for (int r = 0; r <= i; ++r) rows.insert(rows.end(), {r % 2 ? -1.f : 1.f, 0.5f});
    requests.back().set_tensor("x", Tensor::from_vector<float>({i + 1, 2}, rows));
  }
  for (auto& r : requests) r.start_async();
  for (int i = 0; i < 8; ++i) {
    requests[static_cast<size_t>(i)].wait();
    const Tensor y = requests[static_cast<size_t>(i)].get_tensor("y");
    const int64_t kept = (i + 2) / 2;
    ASSERT_EQ(y.shape(), (Shape{kept, 2})) << "request " << i;
    for (int64_t r = 0; r < kept; ++r) EXPECT_EQ(y.to_vector<float>()[r * 2], 1.f);
  }
}

TEST(DataDependentShapes, BadDataFailsOnlyItsOwnRequest) {
  // A Compress condition longer than the axis is refused when the data comes, as a typed error
  // naming the node; the next request runs.
  ModelBuilder b("compress");
  auto x = b.input("x", ElementType::f32, {4});
  auto condition = b.input("condition", ElementType::boolean, {Shape::dynamic});
  b.output(b.op("Compress", {x, condition}, {{"axis", int64_t{0}}}, "compress"), "y");
  Core core;
  auto compiled = core.compile_model(b.build(), "CPU");
  auto request = compiled.create_infer_request();
  request.set_tensor("x", Tensor::from_vector<float>({4}, {1, 2, 3, 4}));
  Tensor too_long(ElementType::boolean, Shape{5});
  for (int i = 0; i < 5; ++i) too_long.data<bool>()[i] = true;
  request.set_tensor("condition", too_long);
  try {
    request.infer();
    ADD_FAILURE() << "expected an ExecutionError";
  } catch (const ExecutionError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("Compress node 'compress'"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("condition has 5 entries"));
  }
  Tensor some(ElementType::boolean, Shape{3});
  for (int i = 0; i < 3; ++i) some.data<bool>()[i] = i != 1;
  request.set_tensor("condition", some);
  request.infer();
  EXPECT_EQ(request.get_tensor("y").to_vector<float>(), (std::vector<float>{1, 3}));
}

TEST(DataDependentShapes, ResizeByScalesGivenWithEachRequest) {
  ModelBuilder b("resize");
  auto x = b.input("x", ElementType::f32, {1, 1, 2, 2});
  auto scales = b.input("scales", ElementType::f32, {4});
  auto roi = b.constant("roi", Tensor(ElementType::f32, Shape{0}));
  b.output(b.op("Resize", {x, roi, scales}, {{"mode", std::string("nearest")}}), "y");
  Core core;
  auto compiled = core.compile_model(b.build(), "CPU");
  auto request = compiled.create_infer_request();
  request.set_tensor("x", Tensor::from_vector<float>({1, 1, 2, 2}, {1, 2, 3, 4}));
  for (float factor : {2.f, 1.f, 3.f}) {
    request.set_tensor("scales", Tensor::from_vector<float>({4}, {1, 1, factor, factor}));
    request.infer();
    const auto side = static_cast<int64_t>(2 * factor);
    EXPECT_EQ(request.get_tensor("y").shape(), (Shape{1, 1, side, side}));
    // The top-left output pixel is always the top-left input pixel; the bottom-right one the
    // bottom-right.
    const std::vector<float> y = request.get_tensor("y").to_vector<float>();
    EXPECT_EQ(y.front(), 1.f);
    EXPECT_EQ(y.back(), 4.f);
  }
}
