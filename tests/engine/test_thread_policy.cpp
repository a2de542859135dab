// Thread policy (engine/graph/thread_policy): a model of tiny compute nodes runs its one LATENCY
// stream on one thread, a model of large ones on all cores, and a thread count the user set is
// kept; the MAC estimate counts Conv and MatMul/Gemm work, integer forms included; a small model's
// execute stages run on the scheduler's workers; inside a stream of several threads, a node too
// small for a parallel region to pay is created and run on one, and so is a tiny model whatever
// the OpenMP wait policy (CMakeLists.txt reruns these with spinning threads); kernel creation
// leaves no OpenMP team on the caller's thread.

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

#include "../test_util.hpp"
#include "engine/graph/compiled_graph.hpp"
#include "engine/graph/thread_policy.hpp"
#include "troupe/core.hpp"
#include "troupe/model_builder.hpp"
#include "troupe/properties.hpp"

namespace troupe {
namespace {

std::shared_ptr<Model> gemm_model(int64_t batch, int64_t in, int64_t out) {
  ModelBuilder b("gemm");
  auto x = b.input("x", ElementType::f32, {batch, in});
  auto w = b.constant("w", Tensor(ElementType::f32, {out, in}));
  b.output(b.op("Gemm", {x, w}, {{"transB", int64_t{1}}}, "gemm"), "y");
  return b.build();
}

std::shared_ptr<Model> conv_model(int64_t channels, int64_t size) {
  ModelBuilder b("conv");
  auto x = b.input("x", ElementType::f32, {1, channels, size, size});
  auto w = b.constant("w", Tensor(ElementType::f32, {channels, channels, 3, 3}));
  b.output(b.op("Conv", {x, w}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv"), "y");
  return b.build();
}

// The integer form of conv_model, as the QDQ fusion leaves a quantized model's layers.
std::shared_ptr<Model> qlinear_conv_model(int64_t channels, int64_t size) {
  ModelBuilder b("qconv");
  auto x = b.input("x", ElementType::u8, {1, channels, size, size});
  auto scale = [&](const char* name) {
    return b.constant(name, Tensor::from_vector<float>({}, {0.05f}));
  };
  auto x_scale = scale("x_scale"), w_scale = scale("w_scale"), y_scale = scale("y_scale");
  auto x_zero = b.constant("x_zero", Tensor::from_vector<uint8_t>({}, {128}));
  auto y_zero = b.constant("y_zero", Tensor::from_vector<uint8_t>({}, {0}));
  auto w_zero = b.constant("w_zero", Tensor::from_vector<int8_t>({}, {0}));
  auto w = b.constant("w", Tensor(ElementType::i8, {channels, channels, 3, 3}));
  b.output(b.op("QLinearConv", {x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero},
                {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv"),
           "y");
  return b.build();
}

TEST(ThreadPolicy, EstimatesMultiplyAccumulates) {
  EXPECT_EQ(detail::estimate_macs(*gemm_model(4, 256, 512)), 4 * 256 * 512);
  EXPECT_EQ(detail::estimate_macs(*conv_model(8, 10)), 8 * 10 * 10 * (8 * 3 * 3));
  // An int8 layer is as much work as its float form (it was counted as none, so a quantized
  // ResNet ran its LATENCY stream on one thread).
  EXPECT_EQ(detail::estimate_macs(*qlinear_conv_model(8, 10)), 8 * 10 * 10 * (8 * 3 * 3));
  // Weighed against f32 work, an int8 one counts a quarter; float nodes are unchanged.
  EXPECT_EQ(detail::estimate_macs(*qlinear_conv_model(8, 10), 4), 8 * 10 * 10 * (8 * 3 * 3) / 4);
  EXPECT_EQ(detail::estimate_macs(*conv_model(8, 10), 4), 8 * 10 * 10 * (8 * 3 * 3));
}

int64_t threads_of(const std::shared_ptr<Model>& model, const AnyMap& extra = {}) {
  Core core;
  AnyMap config = {{props::performance_mode, std::string("LATENCY")}};
  for (const auto& [k, v] : extra) config[k] = v;
  return core.compile_model(model, "CPU", config)
      .get_property(props::inference_num_threads)
      .as_int();
}

TEST(ThreadPolicy, TinyNodesRunOnOneThreadLargeOnesOnAllCores) {
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_EQ(threads_of(gemm_model(1, 256, 512)), 1);
  EXPECT_EQ(threads_of(conv_model(64, 56)), cores);  // 116 M MACs
  EXPECT_EQ(threads_of(qlinear_conv_model(64, 56)), cores);
  EXPECT_EQ(threads_of(gemm_model(1, 256, 512), {{props::inference_num_threads, int64_t{2}}}), 2);
}

int node_threads_in(const std::shared_ptr<Model>& model, int stream_threads) {
  const Node& node = model->nodes().at(0);
  std::vector<ValueInfo> inputs, outputs;
  for (ValueId v : node.inputs) inputs.push_back(model->value(v));
  for (ValueId v : node.outputs) outputs.push_back(model->value(v));
  return detail::node_threads(node, inputs, outputs, stream_threads);
}

TEST(ThreadPolicy, ANodeTooSmallToSplitRunsOnOneThreadOfItsStream) {
  // 4 k multiply-accumulates: microseconds on one core, against a parallel region's wake-up.
  EXPECT_EQ(node_threads_in(gemm_model(1, 64, 64), 2), 1);
  EXPECT_EQ(node_threads_in(conv_model(64, 56), 2), 0);     // 116 M: the stream's threads
  EXPECT_EQ(node_threads_in(gemm_model(1, 64, 64), 1), 0);  // nothing to take away
}

TEST(ThreadPolicy, KernelsAreCreatedWithTheirNodesThreadCount) {
  // A large convolution (29 M MACs), then a pool and a tiny Gemm (each a few microseconds under
  // either split threshold, threads spinning or sleeping), in one 2-thread stream.
  ModelBuilder b("mixed");
  auto x = b.input("x", ElementType::f32, {1, 64, 28, 28});
  auto w = b.constant("w", Tensor(ElementType::f32, {64, 64, 3, 3}));
  auto conv = b.op("Conv", {x, w}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv");
  auto pooled = b.op("Flatten", {b.op("GlobalAveragePool", {conv}, {}, "pool")}, {}, "flat");
  auto fc = b.constant("fc_w", Tensor(ElementType::f32, {10, 64}));
  b.output(b.op("Gemm", {pooled, fc}, {{"transB", int64_t{1}}}, "fc"), "y");
  detail::CompileConfig config;
  config.threads_per_stream = 2;
  config.inference_num_threads = 2;
  std::vector<std::unique_ptr<kernels::Kernel>> kernels;
  auto graph = detail::compile_graph(*b.build(), config, &kernels);
  ASSERT_EQ(kernels.size(), graph->model->nodes().size());
  for (size_t n = 0; n < kernels.size(); ++n) {
    const std::string& name = graph->model->nodes()[n].name;
    ASSERT_TRUE(kernels[n]) << name;
    EXPECT_EQ(kernels[n]->threads(), name == "conv" ? 0 : 1) << name;
  }
}

TEST(ThreadPolicy, WorkOnItsOwnThreadRunsThereAndRethrows) {
  const auto caller = std::this_thread::get_id();
  std::thread::id ran_on;
  detail::run_on_own_thread(2, [&] { ran_on = std::this_thread::get_id(); });
  EXPECT_NE(ran_on, caller);
  detail::run_on_own_thread(1, [&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, caller);  // no OpenMP team to leave behind: no thread either
  EXPECT_THROW(detail::run_on_own_thread(2, [] { throw std::invalid_argument("bad"); }),
               std::invalid_argument);
}

detail::CompileConfig execute_config(const std::shared_ptr<Model>& model, int threads_per_stream,
                                     int auto_batch = 1, int streams = 2, size_t workers = 2) {
  detail::CompileConfig config;
  config.num_streams = streams;
  config.threads_per_stream = threads_per_stream;
  config.auto_batch_max_size = auto_batch;
  detail::choose_execute_threads(config, *model, workers);
  return config;
}

bool on_scheduler(const std::shared_ptr<Model>& model, int threads_per_stream, int auto_batch = 1,
                  int streams = 2, size_t workers = 2) {
  return execute_config(model, threads_per_stream, auto_batch, streams, workers)
      .execute_on_scheduler;
}

TEST(ThreadPolicy, SmallModelsExecuteOnTheScheduler) {
  EXPECT_TRUE(on_scheduler(gemm_model(1, 256, 512), 1));
  EXPECT_FALSE(on_scheduler(gemm_model(1, 256, 512), 2));            // an OpenMP team of its own
  EXPECT_FALSE(on_scheduler(conv_model(64, 56), 1));                 // 116 M MACs
  EXPECT_FALSE(on_scheduler(gemm_model(1, 256, 512), 1, 8));         // merged runs are long
  EXPECT_FALSE(on_scheduler(gemm_model(1, 256, 512), 1, 1, 16, 8));  // more streams than workers
  EXPECT_TRUE(on_scheduler(gemm_model(1, 256, 512), 1, 1, 8, 8));
  // No multiply-accumulates, but 4 M elements to add.
  EXPECT_FALSE(on_scheduler(test::make_add_relu_model(1, 4'000'000), 1));
  EXPECT_TRUE(on_scheduler(test::make_add_relu_model(1, 1'000), 1));
}

// A model whose stream has one thread anyway runs on the workers up to four times the small
// model's bound (a 7.2 M multiply-accumulate convolution: no wake-up of a stream thread); with a
// dynamic batch, whose requests' sizes the estimate does not know, the small model's bound stays.
TEST(ThreadPolicy, AOneThreadModelUpToFourTimesTheSmallBoundExecutesOnTheScheduler) {
  EXPECT_TRUE(on_scheduler(conv_model(32, 28), 1));
  EXPECT_FALSE(on_scheduler(conv_model(64, 28), 1));  // 28.9 M
  ModelBuilder b("dynamic_conv");
  auto x = b.input("x", ElementType::f32, {Shape::dynamic, 32, 28, 28});
  auto w = b.constant("w", Tensor(ElementType::f32, {32, 32, 3, 3}));
  b.output(b.op("Conv", {x, w}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv"), "y");
  EXPECT_FALSE(on_scheduler(b.build(), 1));
}

TEST(ThreadPolicy, ADynamicModelBoundsTheRequestsRunOnTheScheduler) {
  // 131 k MACs per row: 30 rows stay under 4 M; the input has 256 elements per row.
  const detail::CompileConfig dynamic = execute_config(gemm_model(-1, 256, 512), 1);
  EXPECT_TRUE(dynamic.execute_on_scheduler);
  EXPECT_EQ(dynamic.scheduled_input_elements_limit, 30 * 256);
  EXPECT_EQ(execute_config(conv_model(64, 56), 1).scheduled_input_elements_limit, 0);
}

// The shape of the ONNX MLP of benchmarks/models: 256 -> 512 -> 512 -> 10, batch 1.
std::shared_ptr<Model> mlp_model(int64_t batch = 1) {
  ModelBuilder b("mlp");
  auto h = b.input("x", ElementType::f32, {batch, 256});
  const std::vector<std::pair<int64_t, int64_t>> layers = {{256, 512}, {512, 512}, {512, 10}};
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string name = "fc" + std::to_string(i);
    auto w = b.constant(name + "_w", Tensor(ElementType::f32, {layers[i].second, layers[i].first}));
    h = b.op("Gemm", {h, w}, {{"transB", int64_t{1}}}, name);
    if (i + 1 < layers.size()) h = b.op("Relu", {h}, {}, name + "_relu");
  }
  b.output(h, "y");
  return b.build();
}

TEST(ThreadPolicy, AModelThatFitsOnTheSchedulerRunsOnOneThreadEvenWithANodeThatWouldSplit) {
  // The MLP's 512 x 512 product, or a 1.8 M multiply-accumulate convolution, alone would split
  // where OpenMP threads spin (about 60 and 45 us estimated on one core), but each model fits on
  // the scheduler: on one thread each request runs on the thread that submits it, no wake-up.
  for (const auto& model : {mlp_model(), conv_model(16, 28)}) {
    EXPECT_EQ(threads_of(model), 1) << model->name();
    EXPECT_TRUE(on_scheduler(model, 1, 1, 1)) << model->name();
  }
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  // 2 M weights, read whole by each run: not on the scheduler; all cores, spinning or sleeping.
  EXPECT_EQ(threads_of(gemm_model(1, 1024, 2048)), cores);
}

// A model with a dynamic batch that fits on the scheduler at batch 1 runs its requests there on
// one thread, and those too large for the scheduler on a thread of their own with the cores the
// stream had.
TEST(ThreadPolicy, ADynamicModelRunsSmallRequestsOnTheSchedulerAndLargeOnesOnTheCores) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (cores < 2) GTEST_SKIP() << "one core: nothing to split";
  detail::CompileConfig config;
  config.threads_per_stream = cores;
  const auto model = mlp_model(-1);
  detail::fit_threads_to_model(config, *model);
  EXPECT_EQ(config.threads_per_stream, 1);
  EXPECT_EQ(config.large_request_threads, cores);
  detail::choose_execute_threads(config, *model, 2);
  EXPECT_TRUE(config.execute_on_scheduler);
  EXPECT_GT(config.scheduled_input_elements_limit, 0);
  // With automatic batching its merged runs are long and run on the stream's thread: no
  // large-request thread, and the stream keeps its threads where they spin (where they sleep,
  // the MLP's small nodes run on one anyway).
  detail::CompileConfig batching;
  batching.threads_per_stream = cores;
  batching.auto_batch_max_size = 8;
  detail::fit_threads_to_model(batching, *model);
  EXPECT_EQ(batching.large_request_threads, 0);
  if (!detail::openmp_threads_sleep_when_idle()) {
    EXPECT_EQ(batching.threads_per_stream, cores);
  }
  // A static one has no larger requests to keep the cores for.
  detail::CompileConfig fixed;
  fixed.threads_per_stream = cores;
  detail::fit_threads_to_model(fixed, *mlp_model());
  EXPECT_EQ(fixed.threads_per_stream, 1);
  EXPECT_EQ(fixed.large_request_threads, 0);
}

// Five 512 x 512 layers (1.3 M weights: too many for the scheduler), 0.26 M multiply-accumulates
// a node for one row. With a static batch of 1 every node is short and, where OpenMP threads
// sleep, the model runs on one thread; with a dynamic batch the estimate at 1 says nothing of the
// requests it will get (a conformer block exported with a dynamic batch and length ran [2, 128,
// 144] on one thread: 6.5 ms against 5.0 on two), so its stream keeps the cores and each node
// decides for the shapes a request brings.
TEST(ThreadPolicy, ADynamicModelTooLargeForTheSchedulerKeepsItsThreads) {
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  if (cores < 2) GTEST_SKIP() << "one core: nothing to split";
  const auto layers = [](int64_t batch) {
    ModelBuilder b("layers");
    auto h = b.input("x", ElementType::f32, {batch, 512});
    for (int i = 0; i < 5; ++i) {
      const std::string name = "fc" + std::to_string(i);
      h = b.op("Gemm", {h, b.constant(name + "_w", Tensor(ElementType::f32, {512, 512}))},
               {{"transB", int64_t{1}}}, name);
    }
    b.output(h, "y");
    return b.build();
  };
  // (Where OpenMP threads spin, a node reading 1 MB of weights splits even for one row.)
  if (detail::openmp_threads_sleep_when_idle()) {
    EXPECT_EQ(threads_of(layers(1)), 1);
  }
  EXPECT_EQ(threads_of(layers(-1)), cores);
}

// An embedding table of millions of rows, of which a request reads a few: neither its size nor
// the Gather's counts as work read whole (a recommender is a small model).
TEST(ThreadPolicy, AnEmbeddingTableCountsTheRowsAGatherReads) {
  ModelBuilder b("embedding");
  auto ids = b.input("ids", ElementType::i64, {1, 8});
  auto table = b.constant("table", Tensor(ElementType::f32, {200'000, 16}));
  auto rows = b.op("Gather", {table, ids}, {}, "gather");
  auto w = b.constant("w", Tensor(ElementType::f32, {4, 128}));
  auto flat =
      b.op("Reshape", {rows, b.constant("shape", Tensor::from_vector<int64_t>({2}, {1, 128}))}, {},
           "flat");
  b.output(b.op("Gemm", {flat, w}, {{"transB", int64_t{1}}}, "fc"), "y");
  const auto model = b.build();
  EXPECT_EQ(node_threads_in(model, 2), 1);  // the Gather: 8 rows, not 12.8 MB
  EXPECT_TRUE(on_scheduler(model, 1, 1, 1));
  EXPECT_EQ(threads_of(model), 1);
}

}  // namespace
}  // namespace troupe
