// The gRPC front end's error statuses: each invalid request is INVALID_ARGUMENT with a message
// naming the tensor or field; unknown models and versions NOT_FOUND; a server shutting down or a
// model not ready UNAVAILABLE; a failing pipeline INTERNAL; an oversized message gRPC's own
// RESOURCE_EXHAUSTED.

#include <gmock/gmock.h>

#include "../actors/pipeline_fixture.hpp"
#include "grpc_test_server.hpp"
#include "server/serve_error.hpp"

using namespace troupe;
using namespace troupe::test::grpc_server;
using ::testing::AllOf;
using ::testing::HasSubstr;

namespace {

grpc::Status infer(TestServer& server, const inference::ModelInferRequest& request) {
  inference::ModelInferResponse response;
  return server.stub->ModelInfer(bounded_context().get(), request, &response);
}

inference::ModelInferRequest valid_request() {
  return add_relu_request(troupe::test::random_tensor({2, width}, 1));
}

// A request whose one input "x" carries typed `values` as FP32 of `shape`.
inference::ModelInferRequest fp32_contents_request(std::vector<int64_t> shape, int values) {
  inference::ModelInferRequest request;
  request.set_model_name("add_relu");
  auto* input = request.add_inputs();
  input->set_name("x");
  input->set_datatype("FP32");
  for (int64_t d : shape) input->add_shape(d);
  for (int i = 0; i < values; ++i) input->mutable_contents()->add_fp32_contents(1.f);
  return request;
}

}  // namespace

#define EXPECT_STATUS(status, code, ...)                                      \
  do {                                                                        \
    const grpc::Status s_ = (status);                                         \
    EXPECT_EQ(s_.error_code(), grpc::StatusCode::code) << s_.error_message(); \
    EXPECT_THAT(s_.error_message(), AllOf(__VA_ARGS__));                      \
  } while (false)

TEST(GrpcFrontendErrors, InvalidInputsNameTheTensorOrField) {
  TestServer server;

  auto unknown = valid_request();
  unknown.mutable_inputs(0)->set_name("q");
  EXPECT_STATUS(infer(server, unknown), INVALID_ARGUMENT, HasSubstr("no input named 'q'"),
                HasSubstr("its inputs: x"));

  inference::ModelInferRequest missing;
  missing.set_model_name("add_relu");
  EXPECT_STATUS(infer(server, missing), INVALID_ARGUMENT, HasSubstr("input 'x'"),
                HasSubstr("missing"));

  auto twice = valid_request();
  add_raw_input(twice, "x", troupe::test::random_tensor({2, width}, 2));
  EXPECT_STATUS(infer(server, twice), INVALID_ARGUMENT, HasSubstr("'x' is given twice"));

  for (const char* datatype : {"UINT128", "FP8", ""}) {
    auto request = valid_request();
    request.mutable_inputs(0)->set_datatype(datatype);
    EXPECT_STATUS(infer(server, request), INVALID_ARGUMENT, HasSubstr("input 'x'"),
                  HasSubstr("datatype '" + std::string(datatype) + "'"));
  }

  auto negative = valid_request();
  negative.mutable_inputs(0)->set_shape(0, -2);
  EXPECT_STATUS(infer(server, negative), INVALID_ARGUMENT, HasSubstr("input 'x'"),
                HasSubstr("negative dimension -2"));

  auto huge = valid_request();
  huge.mutable_inputs(0)->set_shape(0, int64_t{1} << 40);  // 2^44 elements, and overflow-safe
  huge.mutable_inputs(0)->add_shape(int64_t{1} << 40);
  EXPECT_STATUS(infer(server, huge), INVALID_ARGUMENT, HasSubstr("input 'x'"),
                HasSubstr("elements (the limit)"));

  auto short_raw = valid_request();
  short_raw.mutable_raw_input_contents(0)->resize(2 * width * 4 - 1);
  EXPECT_STATUS(infer(server, short_raw), INVALID_ARGUMENT, HasSubstr("input 'x'"),
                HasSubstr("127 bytes"));

  auto both = valid_request();
  both.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.f);
  EXPECT_STATUS(infer(server, both), INVALID_ARGUMENT, HasSubstr("input 'x'"),
                HasSubstr("raw_input_contents"));

  auto extra_raw = valid_request();
  extra_raw.add_raw_input_contents("abcd");
  EXPECT_STATUS(infer(server, extra_raw), INVALID_ARGUMENT,
                HasSubstr("raw_input_contents has 2 entries for 1 inputs"));

  auto unnamed = valid_request();
  unnamed.mutable_inputs(0)->set_name("");
  EXPECT_STATUS(infer(server, unnamed), INVALID_ARGUMENT, HasSubstr("inputs[0] has no name"));

  auto output = valid_request();
  output.add_outputs()->set_name("w");
  EXPECT_STATUS(infer(server, output), INVALID_ARGUMENT, HasSubstr("no output named 'w'"),
                HasSubstr("its outputs: y, z"));

  // The model's own check: a shape its graph does not take.
  auto shape = add_relu_request(troupe::test::random_tensor({2, width + 1}, 3));
  EXPECT_STATUS(infer(server, shape), INVALID_ARGUMENT, HasSubstr("x"));
}

TEST(GrpcFrontendErrors, InvalidTypedContentsNameTheField) {
  TestServer server;
  EXPECT_STATUS(infer(server, fp32_contents_request({2, width}, 2 * width - 1)), INVALID_ARGUMENT,
                HasSubstr("input 'x'"), HasSubstr("31 values in fp32_contents"),
                HasSubstr("[2,16] has 32 elements"));

  auto wrong_field = fp32_contents_request({1, width}, 0);
  for (int i = 0; i < width; ++i)
    wrong_field.mutable_inputs(0)->mutable_contents()->add_int64_contents(1);
  EXPECT_STATUS(infer(server, wrong_field), INVALID_ARGUMENT, HasSubstr("input 'x'"),
                HasSubstr("fp32_contents, not in int64_contents"));

  // Narrow integers travel in 32-bit fields: out-of-range values are refused, not wrapped.
  inference::ModelInferRequest int8;
  int8.set_model_name("identities");
  auto* input = int8.add_inputs();
  input->set_name("in_i8");
  input->set_datatype("INT8");
  input->add_shape(2);
  input->mutable_contents()->add_int_contents(5);
  input->mutable_contents()->add_int_contents(300);
  EXPECT_STATUS(infer(server, int8), INVALID_ARGUMENT, HasSubstr("input 'in_i8'"),
                HasSubstr("int_contents[1] = 300 is out of range for INT8"));
}

TEST(GrpcFrontendErrors, RawBoolBytesMustBeZeroOrOne) {
  TestServer server;
  inference::ModelInferRequest request;
  request.set_model_name("identities");
  for (ElementType type : identity_types())
    add_raw_input(request, "in_" + type_suffix(type), Tensor(type, Shape{1}));
  const int bool_index = 6;
  ASSERT_EQ(request.inputs(bool_index).datatype(), "BOOL");
  (*request.mutable_raw_input_contents(bool_index))[0] = 2;
  EXPECT_STATUS(infer(server, request), INVALID_ARGUMENT, HasSubstr("input 'in_boolean'"),
                HasSubstr("must be 0 or 1"));
}

TEST(GrpcFrontendErrors, UnknownModelsAndVersionsAreNotFound) {
  TestServer server;
  auto request = valid_request();
  request.set_model_name("nope");
  EXPECT_STATUS(infer(server, request), NOT_FOUND, HasSubstr("'nope'"));
  request = valid_request();
  request.set_model_version("3");
  EXPECT_STATUS(infer(server, request), NOT_FOUND, HasSubstr("no version '3'"));

  inference::ModelMetadataRequest metadata;
  metadata.set_name("nope");
  inference::ModelMetadataResponse response;
  EXPECT_STATUS(server.stub->ModelMetadata(bounded_context().get(), metadata, &response), NOT_FOUND,
                HasSubstr("'nope'"));
  metadata.set_name("add_relu");
  metadata.set_version("2");
  EXPECT_STATUS(server.stub->ModelMetadata(bounded_context().get(), metadata, &response), NOT_FOUND,
                HasSubstr("no version '2'"));
}

TEST(GrpcFrontendErrors, ShuttingDownOrUnloadedIsUnavailable) {
  TestServer server;
  server.repository.unload("add_relu");
  EXPECT_STATUS(infer(server, valid_request()), UNAVAILABLE, HasSubstr("add_relu"),
                HasSubstr("not ready"));
  inference::ModelMetadataRequest metadata;
  metadata.set_name("add_relu");
  inference::ModelMetadataResponse response;
  EXPECT_STATUS(server.stub->ModelMetadata(bounded_context().get(), metadata, &response),
                UNAVAILABLE, HasSubstr("not ready"));

  server.repository.load("add_relu");
  ASSERT_TRUE(infer(server, valid_request()).ok());
  server.context.accepting = false;
  EXPECT_STATUS(infer(server, valid_request()), UNAVAILABLE, HasSubstr("shutting down"));
}

TEST(GrpcFrontendErrors, AFailingPipelineIsInternal) {
  TestServer server;
  CompiledModel compiled = server.model()->compiled();
  troupe::test::set_stage_hook(compiled, [](detail::Stage stage, uint64_t) {
    if (stage == detail::Stage::execute) throw std::runtime_error("injected kernel failure");
  });
  EXPECT_STATUS(infer(server, valid_request()), INTERNAL, HasSubstr("injected kernel failure"));
  troupe::test::set_stage_hook(compiled, nullptr);
  EXPECT_TRUE(infer(server, valid_request()).ok());  // only that request failed
  // The failed request counts as a failure of the model, the next one as a success.
  EXPECT_EQ(server.model()->counters().failure.load(), 1u);
  EXPECT_EQ(server.model()->counters().success.load(), 1u);
}

TEST(GrpcFrontendErrors, RejectedRequestsCountAsFailuresOfTheModel) {
  TestServer server;
  auto request = valid_request();
  request.mutable_inputs(0)->set_datatype("FP8");
  EXPECT_FALSE(infer(server, request).ok());
  const auto& counters = server.model()->counters();
  EXPECT_EQ(counters.failure.load(), 1u);
  EXPECT_EQ(counters.failures_by_reason[static_cast<size_t>(server::ServeErrc::bad_request)].load(),
            1u);
}

TEST(GrpcFrontendErrors, AMessageOverTheBodyLimitIsRefusedByGrpc) {
  server::ServerLimits limits;
  limits.max_body_bytes = 1024;
  TestServer server(limits);
  EXPECT_TRUE(infer(server, add_relu_request(troupe::test::random_tensor({2, width}, 1))).ok());
  const grpc::Status status =
      infer(server, add_relu_request(troupe::test::random_tensor({64, width}, 1)));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
}
