#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "../test_util.hpp"
#include "engine/runtime/compiled_model_impl.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/properties.hpp"

using namespace troupe;
using ::testing::Contains;
using ::testing::HasSubstr;
using troupe::test::error_of;

TEST(Properties, AnyConversions) {
  EXPECT_EQ(Any("4").as_int(), 4);
  EXPECT_TRUE(Any("YES").as_bool());
  EXPECT_FALSE(Any("false").as_bool());
  EXPECT_EQ(Any(2.5).as_string(), "2.5");
  EXPECT_EQ(Any(std::vector<std::string>{"a", "b"}).as_string(), "a b");
  EXPECT_THROW(Any("four").as_int(), InvalidArgument);
  EXPECT_THROW(Any("maybe").as_bool(), InvalidArgument);
}

TEST(Properties, DeviceReadOnlyProperties) {
  Core core;
  EXPECT_EQ(core.available_devices(), std::vector<std::string>{"CPU"});
  auto supported = core.get_property("CPU", props::supported_properties).as_strings();
  for (const char* key :
       {props::available_devices, props::device_full_name, props::device_capabilities,
        props::range_for_async_infer_requests, props::device_id, props::enable_profiling,
        props::num_streams, props::inference_num_threads, props::performance_mode,
        props::num_requests, props::disable_transformations, props::exclusive_async_requests,
        props::inference_precision})
    EXPECT_THAT(supported, Contains(std::string(key)));
  EXPECT_FALSE(core.get_property("CPU", props::device_full_name).as_string().empty());
  EXPECT_THAT(core.get_property("CPU", props::device_capabilities).as_strings(),
              Contains(std::string("FP32")));
  EXPECT_EQ(core.get_property("CPU", props::range_for_async_infer_requests).as_strings().size(),
            3u);
}

TEST(Properties, UnknownKeysAndBadValuesNameTheKey) {
  Core core;
  std::string msg = error_of<UnknownProperty>([&] {
    core.set_property("CPU", {{"NUM_STREAMZ", 2}});
  });
  EXPECT_THAT(msg, HasSubstr("NUM_STREAMZ"));
  EXPECT_THAT(msg, HasSubstr("NUM_STREAMS"));  // lists what is allowed
  msg = error_of<InvalidArgument>([&] {
    core.set_property("CPU", {{props::performance_mode, "FAST"}});
  });
  EXPECT_THAT(msg, HasSubstr(props::performance_mode));
  EXPECT_THAT(msg, HasSubstr("LATENCY"));
  msg = error_of<InvalidArgument>([&] { core.set_property("CPU", {{props::num_streams, 0}}); });
  EXPECT_THAT(msg, HasSubstr(props::num_streams));
  msg = error_of<InvalidArgument>([&] {
    core.set_property("CPU", {{props::inference_precision, "i8"}});
  });
  EXPECT_THAT(msg, HasSubstr(props::inference_precision));
  msg = error_of<InvalidArgument>([&] {
    core.set_property("CPU", {{props::enable_profiling, "sometimes"}});
  });
  EXPECT_THAT(msg, HasSubstr(props::enable_profiling));
  msg = error_of<InvalidArgument>([&] {
    core.set_property("CPU", {{props::callback_thread, "ANYWHERE"}});
  });
  EXPECT_THAT(msg, HasSubstr(props::callback_thread));
  EXPECT_THAT(msg, HasSubstr("COMPLETION, STAGE"));
  EXPECT_THROW(core.set_property("CPU", {{props::device_full_name, "x"}}), InvalidArgument);
  EXPECT_THROW(core.set_property("GPU", {{props::num_streams, 1}}), InvalidArgument);
  EXPECT_THROW(core.get_property("CPU", "NOPE"), UnknownProperty);
  // A failing set changes nothing.
  EXPECT_THROW(core.set_property("CPU", {{props::num_streams, 2}, {"BOGUS", 1}}), UnknownProperty);
  EXPECT_EQ(core.get_property("CPU", props::num_streams).as_int(), 1);
}

TEST(Properties, CompilePropertiesOverrideDevice) {
  Core core;
  core.set_property("CPU", {{props::performance_mode, "THROUGHPUT"}, {props::num_streams, 2}});
  EXPECT_EQ(core.get_property("CPU", props::performance_mode).as_string(), "THROUGHPUT");
  auto model = test::make_add_relu_model();
  auto inherited = core.compile_model(model, "CPU");
  EXPECT_EQ(inherited.get_property(props::num_streams).as_int(), 2);
  EXPECT_EQ(inherited.get_property(props::performance_mode).as_string(), "THROUGHPUT");
  EXPECT_GE(inherited.get_property(props::optimal_number_of_infer_requests).as_int(), 2);
  auto overridden = core.compile_model(
      model, "CPU", {{props::num_streams, 1}, {props::performance_mode, "LATENCY"}});
  EXPECT_EQ(overridden.get_property(props::num_streams).as_int(), 1);
  EXPECT_EQ(overridden.get_property(props::optimal_number_of_infer_requests).as_int(), 1);
  EXPECT_THROW(core.compile_model(model, "CPU", {{"NOT_A_KEY", 1}}), UnknownProperty);
  EXPECT_EQ(inherited.get_property(props::callback_thread).as_string(), "COMPLETION");
  auto on_stage = core.compile_model(model, "CPU", {{props::callback_thread, "stage"}});
  EXPECT_EQ(on_stage.get_property(props::callback_thread).as_string(), "STAGE");
}

TEST(Properties, HintsChooseStreamsAndRequests) {
  Core core;
  auto model = test::make_add_relu_model();
  auto latency = core.compile_model(model, "CPU", {{props::performance_mode, "LATENCY"}});
  EXPECT_EQ(latency.get_property(props::num_streams).as_int(), 1);
  auto throughput = core.compile_model(
      model, "CPU", {{props::performance_mode, "THROUGHPUT"}, {props::num_requests, 1}});
  EXPECT_EQ(throughput.get_property(props::optimal_number_of_infer_requests).as_int(), 1);
  auto exclusive = core.compile_model(
      model, "CPU",
      {{props::performance_mode, "THROUGHPUT"}, {props::exclusive_async_requests, true}});
  EXPECT_EQ(exclusive.get_property(props::num_streams).as_int(), 1);
  auto threads = core.compile_model(model, "CPU", {{props::inference_num_threads, 1}});
  EXPECT_EQ(threads.get_property(props::inference_num_threads).as_int(), 1);
}

TEST(CompiledModel, ReadOnlyPropertiesAndRuntimeModel) {
  Core core;
  auto model = test::make_add_relu_model();
  auto compiled = core.compile_model(model);
  EXPECT_EQ(compiled.get_property(props::model_name).as_string(), "add_relu");
  EXPECT_EQ(compiled.get_property(props::execution_devices).as_strings(),
            std::vector<std::string>{"CPU"});
  EXPECT_FALSE(compiled.get_property(props::loaded_from_cache).as_bool());
  EXPECT_THAT(compiled.get_property(props::supported_properties).as_strings(),
              Contains(std::string(props::optimal_number_of_infer_requests)));
  EXPECT_THROW(compiled.get_property("NOPE"), UnknownProperty);
  auto runtime = compiled.runtime_model();
  ASSERT_EQ(runtime->nodes().size(), 2u);
  EXPECT_EQ(runtime->nodes()[0].attributes.get_string("layer_type"), "Add");
  EXPECT_EQ(runtime->nodes()[1].attributes.get_int("execution_order"), 1);
  EXPECT_FALSE(runtime->nodes()[1].attributes.get_string("implementation").empty());
  ASSERT_EQ(compiled.inputs().size(), 1u);
  EXPECT_EQ(compiled.inputs()[0].name, "x");
  EXPECT_EQ(compiled.outputs()[0].name, "y");
}

TEST(Core, QueryModelAndReadModelErrors) {
  Core core;
  auto model = test::make_add_relu_model();
  auto supported = core.query_model(model, "CPU");
  EXPECT_EQ(supported.size(), 2u);
  EXPECT_EQ(supported.at("relu"), "CPU");
  EXPECT_THROW(core.query_model(model, "TPU"), InvalidArgument);
  std::string msg = error_of<InvalidArgument>([&] { core.read_model("/nonexistent/model.xyz"); });
  EXPECT_THAT(msg, HasSubstr("/nonexistent/model.xyz"));
  EXPECT_THROW(core.compile_model(nullptr), InvalidArgument);
}

namespace {

// A Conv -> Relu -> MatMul model with constant weights: the kernels that compute in bf16.
std::shared_ptr<Model> make_conv_matmul_model() {
  ModelBuilder b("conv_matmul");
  auto x = b.input("x", ElementType::f32, {2, 8, 6, 6});
  auto w = b.constant("w", test::random_tensor(Shape{16, 8, 3, 3}, 11));
  auto conv = b.op("Conv", {x, w}, Attributes{{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv");
  auto flat = b.op("Flatten", {b.op("Relu", {conv}, {}, "relu")}, {}, "flatten");
  auto m = b.constant("m", test::random_tensor(Shape{16 * 6 * 6, 10}, 12));
  b.output(b.op("MatMul", {flat, m}, {}, "matmul"), "y");
  return b.build();
}

bool cpu_has_native_bf16(Core& core) {
  const auto caps = core.get_property("CPU", props::device_capabilities).as_strings();
  return std::find(caps.begin(), caps.end(), "BF16") != caps.end();
}

// The largest |f32 - bf16| difference of each of `n` requests run in flight on both compiled
// models with the same random input, and the f32 output's largest magnitude (its scale).
struct Deviation {
  float worst = 0.f;
  float scale = 0.f;
};
std::vector<Deviation> f32_vs_bf16_in_flight(CompiledModel& f32, CompiledModel& bf16, int n,
                                             unsigned seed) {
  std::vector<InferRequest> f32_requests, bf16_requests;
  for (int i = 0; i < n; ++i) {
    const Tensor x = test::random_tensor(Shape{2, 8, 6, 6}, seed + static_cast<unsigned>(i));
    f32_requests.push_back(f32.create_infer_request());
    bf16_requests.push_back(bf16.create_infer_request());
    f32_requests.back().set_tensor("x", x);
    bf16_requests.back().set_tensor("x", x);
  }
  for (int i = 0; i < n; ++i) {
    f32_requests[i].start_async();
    bf16_requests[i].start_async();
  }
  std::vector<Deviation> deviations;
  for (int i = 0; i < n; ++i) {
    f32_requests[i].wait();
    bf16_requests[i].wait();
    const auto want = f32_requests[i].get_tensor("y").to_vector<float>();
    const auto got = bf16_requests[i].get_tensor("y").to_vector<float>();
    EXPECT_EQ(want.size(), got.size());
    Deviation d;
    for (size_t k = 0; k < want.size() && k < got.size(); ++k) {
      d.scale = std::max(d.scale, std::fabs(want[k]));
      d.worst = std::max(d.worst, std::fabs(want[k] - got[k]));
    }
    deviations.push_back(d);
  }
  return deviations;
}

}  // namespace

TEST(InferencePrecision, Bf16FallsBackToF32WithoutBf16Instructions) {
  Core core;
  auto compiled =
      core.compile_model(make_conv_matmul_model(), "CPU", {{props::inference_precision, "bf16"}});
  EXPECT_EQ(compiled.get_property(props::inference_precision).as_string(),
            cpu_has_native_bf16(core) ? "bf16" : "f32");
  auto f32 = core.compile_model(make_conv_matmul_model(), "CPU");
  EXPECT_EQ(f32.get_property(props::inference_precision).as_string(), "f32");
}

// EXECUTION_MODE_HINT: PERFORMANCE picks bf16 exactly where the CPU computes it natively,
// ACCURACY (the default) keeps f32, and an explicit INFERENCE_PRECISION_HINT wins over either.
TEST(InferencePrecision, ExecutionModeChoosesThePrecision) {
  Core core;
  const std::string native = cpu_has_native_bf16(core) ? "bf16" : "f32";
  auto performance =
      core.compile_model(make_conv_matmul_model(), "CPU", {{props::execution_mode, "PERFORMANCE"}});
  EXPECT_EQ(performance.get_property(props::inference_precision).as_string(), native);
  EXPECT_EQ(performance.get_property(props::execution_mode).as_string(), "PERFORMANCE");
  auto accuracy =
      core.compile_model(make_conv_matmul_model(), "CPU", {{props::execution_mode, "accuracy"}});
  EXPECT_EQ(accuracy.get_property(props::inference_precision).as_string(), "f32");
  auto by_default = core.compile_model(make_conv_matmul_model(), "CPU");
  EXPECT_EQ(by_default.get_property(props::execution_mode).as_string(), "ACCURACY");
  auto explicit_f32 = core.compile_model(
      make_conv_matmul_model(), "CPU",
      {{props::execution_mode, "PERFORMANCE"}, {props::inference_precision, "f32"}});
  EXPECT_EQ(explicit_f32.get_property(props::inference_precision).as_string(), "f32");
  try {
    core.compile_model(make_conv_matmul_model(), "CPU", {{props::execution_mode, "FAST"}});
    ADD_FAILURE() << "an unknown execution mode was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("EXECUTION_MODE_HINT"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("PERFORMANCE, ACCURACY"));
  }
}

// On CPUs without bf16 instructions TROUPE_BF16_EMULATION=1 runs the bf16 path through oneDNN's
// emulation (AVX-512), so it is checked here end to end: property, implementations, numbers, and
// many requests in flight through the pipeline.
TEST(InferencePrecision, Bf16ComputesInBf16ThroughThePipeline) {
  if (!test::cpu_has_avx512()) GTEST_SKIP() << "oneDNN runs bf16 only on AVX-512";
  const test::ScopedEnv emulation("TROUPE_BF16_EMULATION", "1");
  Core core;
  auto model = make_conv_matmul_model();
  auto reference = core.compile_model(model, "CPU");
  auto bf16 = core.compile_model(
      model, "CPU",
      {{props::inference_precision, "bf16"}, {props::performance_mode, "THROUGHPUT"}});
  ASSERT_EQ(bf16.get_property(props::inference_precision).as_string(), "bf16");
  int bf16_nodes = 0;
  const auto runtime = bf16.runtime_model();
  for (const Node& node : runtime->nodes()) {
    const std::string impl = node.attributes.get_string("implementation");
    if (impl.find("bf16") != std::string::npos) ++bf16_nodes;
  }
  EXPECT_EQ(bf16_nodes, 2) << "Conv and MatMul compute in bf16";

  const auto deviations = f32_vs_bf16_in_flight(reference, bf16, 24, 100);
  for (size_t i = 0; i < deviations.size(); ++i) {
    // bf16 keeps 8 mantissa bits: a few parts per thousand of the output's scale, not exact.
    EXPECT_LT(deviations[i].worst, 2e-2f * deviations[i].scale) << "request " << i;
    EXPECT_GT(deviations[i].worst, 0.f)
        << "request " << i << " is bit-identical to f32: bf16 did not run";
  }
}

TEST(InferencePrecision, AMalformedEmulationSwitchIsNamed) {
  Core core;
  {
    const test::ScopedEnv emulation("TROUPE_BF16_EMULATION", "yes");
    const std::string msg = error_of<InvalidArgument>([&] {
      core.compile_model(make_conv_matmul_model(), "CPU", {{props::inference_precision, "bf16"}});
    });
    EXPECT_THAT(msg, HasSubstr("TROUPE_BF16_EMULATION"));
    EXPECT_THAT(msg, HasSubstr("'yes'"));
  }
  // Nothing stuck: the same core compiles the model once the variable is gone.
  EXPECT_NO_THROW(
      core.compile_model(make_conv_matmul_model(), "CPU", {{props::inference_precision, "bf16"}}));
}

// In bf16, a model input that only bf16 convolutions read is converted to bf16 once, by the
// upload stage, in the convolutions' layout; the convolutions then read it without a conversion of
// their own. A second reader that computes in f32 keeps the input f32.
TEST(InferencePrecision, UploadConvertsAnInputOnlyBf16KernelsReadToBf16) {
  if (!test::cpu_has_avx512()) GTEST_SKIP() << "oneDNN runs bf16 only on AVX-512";
  const test::ScopedEnv emulation("TROUPE_BF16_EMULATION", "1");
  Core core;
  auto model = make_conv_matmul_model();
  auto f32 = core.compile_model(model, "CPU");
  auto bf16 = core.compile_model(model, "CPU", {{props::inference_precision, "bf16"}});
  const auto& f32_layouts = f32.impl()->context().graph_input_layouts;
  const auto& bf16_layouts = bf16.impl()->context().graph_input_layouts;
  ASSERT_EQ(bf16_layouts.size(), 1u);
  EXPECT_TRUE(bf16_layouts[0].bf16);
  EXPECT_TRUE(bf16_layouts[0].same_order(f32_layouts[0]));
  EXPECT_FALSE(f32_layouts[0].bf16);

  const auto deviations = f32_vs_bf16_in_flight(f32, bf16, 16, 300);
  for (size_t i = 0; i < deviations.size(); ++i)
    EXPECT_LT(deviations[i].worst, 2e-2f * deviations[i].scale) << "request " << i;

  // The same input also read by an f32 Sigmoid: it stays f32.
  ModelBuilder b("conv_and_sigmoid");
  auto x = b.input("x", ElementType::f32, {1, 8, 6, 6});
  auto w = b.constant("w", test::random_tensor(Shape{8, 8, 3, 3}, 13));
  auto conv = b.op("Conv", {x, w}, Attributes{{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv");
  b.output(conv, "y");
  b.output(b.op("Sigmoid", {x}, {}, "sigmoid"), "z");
  auto mixed = core.compile_model(b.build(), "CPU", {{props::inference_precision, "bf16"}});
  EXPECT_FALSE(mixed.impl()->context().graph_input_layouts[0].bf16);
}

// In bf16, a value one bf16 convolution, pooling or product writes and only such kernels read (as
// input or as the residual of a fused sum) is stored as bf16: written so by the first,
// read so by the others, never converted. A value an f32 kernel reads and the model output stay
// f32.
// With 16 requests in flight on two streams the outputs stay within bf16's error of f32's.
TEST(InferencePrecision, ValuesBetweenBf16ConvolutionsAreStoredAsBf16) {
  if (!test::cpu_has_avx512()) GTEST_SKIP() << "oneDNN runs bf16 only on AVX-512";
  const test::ScopedEnv emulation("TROUPE_BF16_EMULATION", "1");
  // Direct convolutions only: a 3x3 one may otherwise time f32 Winograd against its bf16 kernel
  // and keep f32 (kernels/dnnl/conv_timing.cpp), which a loaded machine (the ASan stage) decided
  // differently from run to run.
  const test::ScopedEnv direct("TROUPE_CONV_WINOGRAD", "0");
  ModelBuilder b("bf16_chain");
  auto x = b.input("x", ElementType::f32, {2, 8, 6, 6});
  auto conv = [&](ValueId in, int64_t channels_in, int64_t k, unsigned seed,
                  const std::string& name) {
    const int64_t pad = k / 2;
    auto w = b.constant(name + "_w",
                        test::random_tensor(Shape{16, channels_in, k, k}, seed, -0.3f, 0.3f));
    return b.op("Conv", {in, w}, Attributes{{"pads", std::vector<int64_t>{pad, pad, pad, pad}}},
                name);
  };
  auto first = b.op("Relu", {conv(x, 8, 3, 21, "first")}, {}, "first_relu");
  auto max_pool = b.op("MaxPool", {first},
                       Attributes{{"kernel_shape", std::vector<int64_t>{3, 3}},
                                  {"pads", std::vector<int64_t>{1, 1, 1, 1}}},
                       "max_pool");
  auto second = conv(max_pool, 16, 1, 22, "second");
  auto third = b.op("Add", {conv(second, 16, 3, 23, "third"), second}, {}, "third_sum");
  // A squeeze-and-excitation block: the product reads `third` (after its fused Relu) in bf16,
  // the per-channel scale in f32.
  auto activated = b.op("Relu", {third}, {}, "third_relu");
  auto squeeze = b.op("GlobalAveragePool", {activated}, {}, "squeeze");
  auto excited = b.op("Mul", {activated, b.op("Sigmoid", {squeeze}, {}, "gate")}, {}, "excite");
  auto fourth = conv(excited, 16, 1, 24, "fourth");
  auto pooled = b.op("GlobalAveragePool", {fourth}, {}, "pool");
  b.output(b.op("Flatten", {pooled}, {}, "flatten"), "y");
  auto model = b.build();

  Core core;
  auto f32 = core.compile_model(model, "CPU", {{props::num_streams, int64_t{2}}});
  auto bf16 = core.compile_model(
      model, "CPU", {{props::num_streams, int64_t{2}}, {props::inference_precision, "bf16"}});
  auto layouts_of = [](const CompiledModel& compiled) {
    const std::shared_ptr<const Model> runtime = compiled.runtime_model();
    std::map<std::string, std::string> layouts;
    for (const Node& n : runtime->nodes())
      layouts[n.name] = n.attributes.get_string_or("output_layouts", "?");
    return layouts;
  };
  const auto layouts = layouts_of(bf16);
  const auto f32_layouts = layouts_of(f32);
  // `first` (with its Relu fused) is read by the max pooling alone, which pools in bf16; its
  // output by `second` alone; `second` by `third`, as its input and as the residual its fused sum
  // starts from; `third` by a squeeze-and-excitation block's pooling and product; `fourth` by the
  // global pooling, whose output is f32 for the f32 Flatten.
  ASSERT_EQ(layouts.count("first"), 1u) << ::testing::PrintToString(layouts);
  EXPECT_THAT(layouts.at("first"), ::testing::EndsWith(":bf16"));
  EXPECT_THAT(layouts.at("max_pool"), ::testing::EndsWith(":bf16"));
  EXPECT_THAT(layouts.at("second"), ::testing::EndsWith(":bf16"));
  EXPECT_THAT(layouts.at("third"), ::testing::EndsWith(":bf16"));
  EXPECT_THAT(layouts.at("excite"), ::testing::EndsWith(":bf16"));
  EXPECT_THAT(layouts.at("fourth"), ::testing::EndsWith(":bf16"));
  EXPECT_THAT(layouts.at("pool"), ::testing::Not(::testing::HasSubstr("bf16")));
  for (const auto& [node, layout] : f32_layouts)
    EXPECT_THAT(layout, ::testing::Not(::testing::HasSubstr("bf16"))) << node;

  const auto deviations = f32_vs_bf16_in_flight(f32, bf16, 16, 500);
  for (size_t i = 0; i < deviations.size(); ++i) {
    EXPECT_GT(deviations[i].scale, 0.f) << "request " << i;
    EXPECT_LT(deviations[i].worst, 3e-2f * deviations[i].scale) << "request " << i;
  }
}
