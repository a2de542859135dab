#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../test_util.hpp"
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
