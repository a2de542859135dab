// The gRPC front end (KServe v2 GRPCInferenceService) through the generated C++ client: every
// RPC's answer, inputs in raw and typed form for every datatype, output selection.

#include <gmock/gmock.h>

#include "grpc_test_server.hpp"
#include "troupe/version.hpp"

using namespace troupe;
using namespace troupe::test::grpc_server;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

namespace {

Tensor batch_input(int64_t batch, unsigned seed) {
  return troupe::test::random_tensor({batch, width}, seed, -2.f, 2.f);
}

}  // namespace

TEST(GrpcFrontend, ServerLiveAndReady) {
  TestServer server;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(server.stub->ServerLive(bounded_context().get(), {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(server.stub->ServerReady(bounded_context().get(), {}, &ready).ok());
  EXPECT_TRUE(ready.ready());

  // A model that failed or was unloaded does not make the server unready...
  server.repository.unload("identities");
  ASSERT_TRUE(server.stub->ServerReady(bounded_context().get(), {}, &ready).ok());
  EXPECT_TRUE(ready.ready());
  // ...shutting down does, while the server stays live.
  server.context.accepting = false;
  ASSERT_TRUE(server.stub->ServerReady(bounded_context().get(), {}, &ready).ok());
  EXPECT_FALSE(ready.ready());
  ASSERT_TRUE(server.stub->ServerLive(bounded_context().get(), {}, &live).ok());
  EXPECT_TRUE(live.live());
}

TEST(GrpcFrontend, ModelReady) {
  TestServer server;
  auto ready = [&](const std::string& name, const std::string& version) {
    inference::ModelReadyRequest request;
    request.set_name(name);
    request.set_version(version);
    inference::ModelReadyResponse response;
    grpc::Status status = server.stub->ModelReady(bounded_context().get(), request, &response);
    return std::make_pair(status.error_code(), response.ready());
  };
  EXPECT_EQ(ready("add_relu", ""), std::make_pair(grpc::StatusCode::OK, true));
  EXPECT_EQ(ready("add_relu", "1"), std::make_pair(grpc::StatusCode::OK, true));
  EXPECT_EQ(ready("add_relu", "2").first, grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ready("nope", "").first, grpc::StatusCode::NOT_FOUND);

  // Known but not ready: unloaded, or added and never loaded.
  server.repository.unload("identities");
  EXPECT_EQ(ready("identities", ""), std::make_pair(grpc::StatusCode::OK, false));
  server.repository.add_model("later", server.folder.path() / "add_relu.troupe");
  EXPECT_EQ(ready("later", ""), std::make_pair(grpc::StatusCode::OK, false));

  server.context.accepting = false;
  EXPECT_EQ(ready("add_relu", ""), std::make_pair(grpc::StatusCode::OK, false));
}

TEST(GrpcFrontend, ServerMetadata) {
  TestServer server;
  inference::ServerMetadataResponse metadata;
  ASSERT_TRUE(server.stub->ServerMetadata(bounded_context().get(), {}, &metadata).ok());
  EXPECT_EQ(metadata.name(), "troupe");
  EXPECT_EQ(metadata.version(), troupe::library_version);
  EXPECT_THAT(metadata.extensions(), ElementsAreArray(server::server_extensions()));
}

TEST(GrpcFrontend, ModelMetadataHasDynamicDimensionsAsMinusOne) {
  TestServer server;
  inference::ModelMetadataRequest request;
  request.set_name("add_relu");
  inference::ModelMetadataResponse metadata;
  grpc::Status status = server.stub->ModelMetadata(bounded_context().get(), request, &metadata);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(metadata.name(), "add_relu");
  EXPECT_THAT(metadata.versions(), ElementsAre("1"));
  EXPECT_EQ(metadata.platform(), "troupe_model");
  ASSERT_EQ(metadata.inputs_size(), 1);
  EXPECT_EQ(metadata.inputs(0).name(), "x");
  EXPECT_EQ(metadata.inputs(0).datatype(), "FP32");
  EXPECT_THAT(metadata.inputs(0).shape(), ElementsAre(-1, width));
  ASSERT_EQ(metadata.outputs_size(), 2);
  EXPECT_EQ(metadata.outputs(0).name(), "y");
  EXPECT_EQ(metadata.outputs(1).name(), "z");
  EXPECT_EQ(metadata.outputs(1).datatype(), "FP32");
  EXPECT_THAT(metadata.outputs(1).shape(), ElementsAre(-1, width));

  request.set_name("identities");
  request.set_version("1");
  ASSERT_TRUE(server.stub->ModelMetadata(bounded_context().get(), request, &metadata).ok());
  std::vector<std::string> datatypes;
  for (const auto& input : metadata.inputs()) datatypes.push_back(input.datatype());
  EXPECT_THAT(datatypes, ElementsAre("FP32", "FP64", "INT64", "INT32", "INT8", "UINT8", "BOOL",
                                     "FP16", "INT16", "UINT16", "UINT32", "UINT64"));
}

TEST(GrpcFrontend, ModelInferWithRawInputsMatchesInProcessInference) {
  TestServer server;
  const Tensor x = batch_input(3, 7);
  inference::ModelInferRequest request = add_relu_request(x, "request-42");
  inference::ModelInferResponse response;
  grpc::Status status = server.stub->ModelInfer(bounded_context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.model_name(), "add_relu");
  EXPECT_EQ(response.model_version(), "1");
  EXPECT_EQ(response.id(), "request-42");
  // Every output in the model's order, as raw contents (what Triton returns).
  ASSERT_EQ(response.outputs_size(), 2);
  ASSERT_EQ(response.raw_output_contents_size(), 2);
  EXPECT_EQ(response.outputs(0).name(), "y");
  EXPECT_EQ(response.outputs(1).name(), "z");
  EXPECT_EQ(response.outputs(0).datatype(), "FP32");
  EXPECT_THAT(response.outputs(0).shape(), ElementsAre(3, width));
  EXPECT_FALSE(response.outputs(0).has_contents());

  const NamedTensors expected = infer_in_process(*server.model(), {{"x", x}});
  EXPECT_TRUE(bit_equal(output_tensor(response, 0), expected.at("y")));
  EXPECT_TRUE(bit_equal(output_tensor(response, 1), expected.at("z")));
  const auto xs = x.to_vector<float>();
  const auto ys = output_tensor(response, 0).to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(ys[i], troupe::test::expected_add_relu(xs[i]));
}

TEST(GrpcFrontend, ModelInferWithTypedContents) {
  TestServer server;
  const Tensor x = batch_input(2, 11);
  inference::ModelInferRequest request;
  request.set_model_name("add_relu");
  request.set_model_version("1");
  auto* input = request.add_inputs();
  input->set_name("x");
  input->set_datatype("FP32");
  input->add_shape(2);
  input->add_shape(width);
  for (float v : x.to_vector<float>()) input->mutable_contents()->add_fp32_contents(v);
  inference::ModelInferResponse response;
  grpc::Status status = server.stub->ModelInfer(bounded_context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.model_version(), "1");
  EXPECT_TRUE(
      bit_equal(output_tensor(response, 0), infer_in_process(*server.model(), {{"x", x}}).at("y")));
}

TEST(GrpcFrontend, ModelInferReturnsOnlyTheRequestedOutputsInTheirOrder) {
  TestServer server;
  const Tensor x = batch_input(1, 3);
  inference::ModelInferRequest request = add_relu_request(x);
  request.add_outputs()->set_name("z");
  inference::ModelInferResponse response;
  ASSERT_TRUE(server.stub->ModelInfer(bounded_context().get(), request, &response).ok());
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).name(), "z");
  EXPECT_TRUE(
      bit_equal(output_tensor(response, 0), infer_in_process(*server.model(), {{"x", x}}).at("z")));

  request.add_outputs()->set_name("y");
  request.add_outputs()->set_name("z");  // a repeated name is answered once
  ASSERT_TRUE(server.stub->ModelInfer(bounded_context().get(), request, &response).ok());
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_EQ(response.outputs(0).name(), "z");
  EXPECT_EQ(response.outputs(1).name(), "y");
}

namespace {

// Values of every test type, given as typed contents and as raw bytes.
struct TypedInputs {
  inference::ModelInferRequest contents_request;
  inference::ModelInferRequest raw_request;
  NamedTensors expected;  // output name -> tensor
};

TypedInputs typed_inputs() {
  TypedInputs t;
  for (auto* request : {&t.contents_request, &t.raw_request}) request->set_model_name("identities");
  auto add = [&](ElementType type, Tensor tensor, auto fill_contents) {
    const std::string name = "in_" + type_suffix(type);
    add_raw_input(t.raw_request, name, tensor);
    auto* input = t.contents_request.add_inputs();
    *input = t.raw_request.inputs(t.raw_request.inputs_size() - 1);
    fill_contents(*input->mutable_contents());
    t.expected["out_" + type_suffix(type)] = tensor;
  };
  add(ElementType::f32, Tensor::from_vector<float>({3}, {1.5f, -0.f, 3e38f}), [](auto& c) {
    for (float v : {1.5f, -0.f, 3e38f}) c.add_fp32_contents(v);
  });
  add(ElementType::f64, Tensor::from_vector<double>({2}, {1e300, -2.25}), [](auto& c) {
    for (double v : {1e300, -2.25}) c.add_fp64_contents(v);
  });
  add(ElementType::i64, Tensor::from_vector<int64_t>({2}, {int64_t{1} << 60, -5}), [](auto& c) {
    for (int64_t v : {int64_t{1} << 60, int64_t{-5}}) c.add_int64_contents(v);
  });
  add(ElementType::i32, Tensor::from_vector<int32_t>({3}, {-2147483647 - 1, 0, 7}), [](auto& c) {
    for (int32_t v : {-2147483647 - 1, 0, 7}) c.add_int_contents(v);
  });
  add(ElementType::i8, Tensor::from_vector<int8_t>({3}, {-128, 127, 0}), [](auto& c) {
    for (int32_t v : {-128, 127, 0}) c.add_int_contents(v);
  });
  add(ElementType::u8, Tensor::from_vector<uint8_t>({2}, {255, 1}), [](auto& c) {
    for (uint32_t v : {255u, 1u}) c.add_uint_contents(v);
  });
  add(ElementType::boolean, Tensor::from_vector<bool>({3}, {true, false, true}), [](auto& c) {
    for (bool v : {true, false, true}) c.add_bool_contents(v);
  });
  // INT16 and UINT16 travel in the 32-bit fields, UINT32 in uint_contents, UINT64 in its own.
  add(ElementType::i16, Tensor::from_vector<int16_t>({2}, {-32768, 32767}), [](auto& c) {
    for (int32_t v : {-32768, 32767}) c.add_int_contents(v);
  });
  add(ElementType::u16, Tensor::from_vector<uint16_t>({2}, {65535, 0}), [](auto& c) {
    for (uint32_t v : {65535u, 0u}) c.add_uint_contents(v);
  });
  add(ElementType::u32, Tensor::from_vector<uint32_t>({2}, {4294967295u, 9}), [](auto& c) {
    for (uint32_t v : {4294967295u, 9u}) c.add_uint_contents(v);
  });
  add(ElementType::u64, Tensor::from_vector<uint64_t>({2}, {18446744073709551615ull, 3}),
      [](auto& c) {
        for (uint64_t v : {uint64_t{18446744073709551615ull}, uint64_t{3}})
          c.add_uint64_contents(v);
      });
  return t;
}

void add_f16_raw(inference::ModelInferRequest& request, NamedTensors& expected) {
  Tensor f16(ElementType::f16, Shape{2});
  auto* bits = static_cast<float16*>(f16.raw_data());
  bits[0] = float16(1.5f);
  bits[1] = float16(-3.f);
  add_raw_input(request, "in_f16", f16);
  expected["out_f16"] = f16;
}

void expect_identities(const inference::ModelInferResponse& response,
                       const NamedTensors& expected) {
  ASSERT_EQ(static_cast<size_t>(response.outputs_size()), expected.size());
  for (int i = 0; i < response.outputs_size(); ++i) {
    const std::string& name = response.outputs(i).name();
    ASSERT_TRUE(expected.count(name)) << name;
    EXPECT_TRUE(bit_equal(output_tensor(response, i), expected.at(name))) << name;
  }
}

}  // namespace

TEST(GrpcFrontend, EveryDatatypeInRawForm) {
  TestServer server;
  TypedInputs t = typed_inputs();
  add_f16_raw(t.raw_request, t.expected);
  inference::ModelInferResponse response;
  grpc::Status status = server.stub->ModelInfer(bounded_context().get(), t.raw_request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  expect_identities(response, t.expected);
}

TEST(GrpcFrontend, EveryDatatypeInTypedContentsExceptHalfFloats) {
  TestServer server;
  TypedInputs t = typed_inputs();
  // FP16 has no contents field: with typed contents it is an error (below), so this request
  // gives an empty FP16 tensor, which needs no values.
  auto* f16 = t.contents_request.add_inputs();
  f16->set_name("in_f16");
  f16->set_datatype("FP16");
  f16->add_shape(0);
  inference::ModelInferResponse response;
  grpc::Status status =
      server.stub->ModelInfer(bounded_context().get(), t.contents_request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  t.expected["out_f16"] = Tensor(ElementType::f16, Shape{0});
  expect_identities(response, t.expected);

  f16->set_shape(0, 1);
  status = server.stub->ModelInfer(bounded_context().get(), t.contents_request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("raw_input_contents"));
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("in_f16"));
}
