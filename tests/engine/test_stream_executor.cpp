// A stream with dynamic shapes builds a specialization per set of input shapes, keeps the most
// recently used ones, and counts what it built: the scheduler's batch size tuner ignores a run
// that built one (engine/graph/stream_executor.hpp, actors/execute_stage.cpp).

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "../test_util.hpp"
#include "engine/graph/compiled_graph.hpp"
#include "engine/graph/stream_executor.hpp"
#include "troupe/model_builder.hpp"

namespace troupe {
namespace {

std::shared_ptr<const detail::CompiledGraph> dynamic_batch_graph() {
  ModelBuilder b("relu");
  auto x = b.input("x", ElementType::f32, {-1, 4});
  b.output(b.op("Relu", {x}, {}, "relu"), "y");
  auto graph = std::make_shared<detail::CompiledGraph>();
  graph->model = b.build();
  graph->dynamic_shapes = true;
  return graph;
}

uint64_t built_after_running(detail::StreamExecutor& stream, const std::vector<int64_t>& batches) {
  for (int64_t batch : batches) {
    const Tensor x = test::random_tensor({batch, 4}, static_cast<uint32_t>(batch));
    std::vector<Tensor> outputs;
    stream.run({x}, outputs, nullptr);
    EXPECT_EQ(outputs.at(0).shape(), x.shape());
  }
  return stream.specializations_built();
}

TEST(StreamExecutor, CountsTheSpecializationsItBuildsAndReusesTheKeptOnes) {
  detail::StreamExecutor stream(dynamic_batch_graph(), 1);
  EXPECT_EQ(stream.specializations_built(), 0u);
  EXPECT_EQ(built_after_running(stream, {1}), 1u);
  EXPECT_EQ(built_after_running(stream, {1, 1}), 1u);
  EXPECT_EQ(built_after_running(stream, {2, 1, 2, 4}), 3u);
}

TEST(StreamExecutor, RebuildsASpecializationItDidNotKeep) {
  detail::StreamExecutor stream(dynamic_batch_graph(), 1);
  stream.keep_specializations(2);
  EXPECT_EQ(built_after_running(stream, {1, 2, 1, 2}), 2u);
  EXPECT_EQ(built_after_running(stream, {3}), 3u);  // 1 leaves: the least recently used
  EXPECT_EQ(built_after_running(stream, {2, 1}), 4u);
}

}  // namespace
}  // namespace troupe
