// The REST API without sockets: RestRoutes over a repository folder with two versions and a
// config.json, every route and status code, and inference bit-exact with in-process results.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <future>

#include <nlohmann/json.hpp>

#include "grpc_test_server.hpp"
#include "server/http/rest_routes.hpp"

namespace troupe::server {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using test::grpc_server::TempFolder;

class RestRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* version : {"1", "2"}) {
      std::filesystem::create_directories(folder_.path() / "add" / version);
      save_model(test::grpc_server::make_add_relu_mul_model(),
                 (folder_.path() / "add" / version / "model.troupe").string());
    }
    std::ofstream(folder_.path() / "add" / "config.json") << R"({"NUM_STREAMS": 2})";
    std::filesystem::create_directories(folder_.path() / "broken" / "1");
    std::ofstream(folder_.path() / "broken" / "1" / "model.onnx") << "not an onnx file";
    repository_ = std::make_unique<ModelRepository>(core_, folder_.path());
    repository_->load_all();
    context_.reset(new ServerContext{actor_system_of(core_), *repository_, {}});
    routes_ = std::make_unique<RestRoutes>(*context_);
  }

  HttpReply call(const std::string& method, const std::string& target, std::string body = "",
                 std::optional<size_t> header_length = std::nullopt) {
    auto promise = std::make_shared<std::promise<HttpReply>>();
    auto future = promise->get_future();
    routes_->handle(HttpRequestView{method, target, body, header_length},
                    [promise](HttpReply r) { promise->set_value(std::move(r)); });
    EXPECT_EQ(future.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    return future.get();
  }

  Core core_;
  TempFolder folder_;
  std::unique_ptr<ModelRepository> repository_;
  std::unique_ptr<ServerContext> context_;
  std::unique_ptr<RestRoutes> routes_;
};

TEST_F(RestRoutesTest, HealthServerAndModelMetadata) {
  EXPECT_EQ(call("GET", "/v2/health/live").status, 200);
  EXPECT_EQ(call("GET", "/v2/health/ready").status, 200);
  const json server = json::parse(call("GET", "/v2").body);
  EXPECT_EQ(server["name"], "troupe");
  EXPECT_THAT(server["extensions"].get<std::vector<std::string>>(),
              ::testing::Contains("binary_tensor_data"));
  const json meta = json::parse(call("GET", "/v2/models/add").body);
  EXPECT_EQ(meta["name"], "add");
  EXPECT_EQ(meta["versions"], json({"1", "2"}));
  EXPECT_EQ(meta["platform"], "troupe_model");
  EXPECT_EQ(meta["inputs"][0]["shape"], json({-1, 16}));  // the dynamic batch
  EXPECT_EQ(meta["outputs"][1]["name"], "z");
  EXPECT_EQ(call("GET", "/v2/models/add/versions/1").status, 200);
  EXPECT_EQ(call("GET", "/v2/models/add/versions/1/ready").status, 200);
  EXPECT_EQ(call("GET", "/v2/models/add/ready").status, 200);
  EXPECT_EQ(call("GET", "/v2/models/nope/ready").status, 404);
  EXPECT_EQ(call("GET", "/v2/models/add/versions/9").status, 404);
  const HttpReply broken = call("GET", "/v2/models/broken/ready");
  EXPECT_EQ(broken.status, 503);
  EXPECT_THAT(broken.body, HasSubstr("model.onnx"));
  EXPECT_EQ(call("GET", "/v3").status, 404);
  EXPECT_EQ(call("DELETE", "/v2").status, 405);
  EXPECT_EQ(call("GET", "/v2/models/add/infer").status, 405);
}

TEST_F(RestRoutesTest, InferIsBitExactWithInProcessInferenceAndCounted) {
  std::vector<float> x(3 * 16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 3;
  const json body = {
      {"id", "q"},
      {"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {3, 16}}, {"data", x}}}},
      {"outputs", {{{"name", "z"}, {"parameters", {{"binary_data", true}}}}}}};
  const HttpReply reply = call("POST", "/v2/models/add/versions/1/infer", body.dump());
  ASSERT_EQ(reply.status, 200) << reply.body;
  ASSERT_TRUE(reply.header_length);
  const json doc = json::parse(reply.body.substr(0, *reply.header_length));
  EXPECT_EQ(doc["id"], "q");
  EXPECT_EQ(doc["model_version"], "1");
  ASSERT_EQ(doc["outputs"].size(), 1u);  // only the requested output

  CompiledModel compiled = repository_->find("add", "1")->compiled();
  auto request = compiled.create_infer_request();
  request.set_tensor("x", Tensor::from_vector<float>({3, 16}, x));
  request.infer();
  const std::vector<float> expected = request.get_tensor("z").to_vector<float>();
  ASSERT_EQ(reply.body.size() - *reply.header_length, expected.size() * 4);
  EXPECT_EQ(
      std::memcmp(reply.body.data() + *reply.header_length, expected.data(), expected.size() * 4),
      0);

  EXPECT_EQ(call("POST", "/v2/models/add/infer", "{").status, 400);
  const HttpReply unknown_output =
      call("POST", "/v2/models/add/infer",
           json{{"inputs", body["inputs"]}, {"outputs", {{{"name", "w"}}}}}.dump());
  EXPECT_EQ(unknown_output.status, 400);
  EXPECT_THAT(unknown_output.body, HasSubstr("no output named 'w'"));
  const HttpReply wrong_shape =
      call("POST", "/v2/models/add/infer",
           json{{"inputs",
                 {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 3}}, {"data", {1, 2, 3}}}}}}
               .dump());
  EXPECT_EQ(wrong_shape.status, 400);
  EXPECT_THAT(wrong_shape.body, HasSubstr("'x'"));
  EXPECT_EQ(call("POST", "/v2/models/nope/infer", body.dump()).status, 404);

  const json stats = json::parse(call("GET", "/v2/models/add/versions/1/stats").body);
  const json& s = stats["model_stats"][0];
  EXPECT_EQ(s["inference_stats"]["success"]["count"], 1);
  EXPECT_EQ(s["inference_stats"]["fail"]["count"], 0);
  EXPECT_EQ(s["inference_count"], 3);  // batch items
  // The pipeline's counters also saw the in-process reference request.
  EXPECT_EQ(s["inference_stats"]["compute_infer"]["count"], 2);
  EXPECT_GT(s["inference_stats"]["compute_infer"]["ns"].get<uint64_t>(), 0u);
  EXPECT_EQ(s["batch_stats"][0]["batch_size"], 1);
  // The malformed requests went to the newest version: 400, 400, 400 (the 404 has no model).
  const json latest = json::parse(call("GET", "/v2/models/add/versions/2/stats").body);
  EXPECT_EQ(latest["model_stats"][0]["inference_stats"]["fail"]["count"], 3);
  EXPECT_EQ(latest["model_stats"][0]["inference_stats"]["success"]["count"], 0);
  EXPECT_EQ(json::parse(call("GET", "/v2/models/stats").body)["model_stats"].size(), 2u);
}

TEST_F(RestRoutesTest, RepositoryIndexLoadAndUnload) {
  const json index = json::parse(call("POST", "/v2/repository/index").body);
  ASSERT_EQ(index.size(), 3u);  // add 1, add 2, broken
  EXPECT_EQ(index[2]["name"], "broken");
  EXPECT_EQ(index[2]["state"], "UNAVAILABLE");
  EXPECT_THAT(index[2]["reason"].get<std::string>(), HasSubstr("failed to load"));

  EXPECT_EQ(call("POST", "/v2/repository/models/add/unload").status, 200);
  EXPECT_EQ(call("GET", "/v2/models/add/ready").status, 503);
  EXPECT_EQ(call("POST", "/v2/repository/models/add/unload").status, 404);
  EXPECT_EQ(call("POST", "/v2/repository/models/add/load").status, 200);
  EXPECT_EQ(call("GET", "/v2/models/add/ready").status, 200);
  EXPECT_EQ(call("POST", "/v2/repository/models/nope/load").status, 404);
  const HttpReply traversal = call("POST", "/v2/repository/models/..%2F..%2Fetc/load");
  EXPECT_EQ(traversal.status, 400);
  EXPECT_THAT(traversal.body, HasSubstr("is not valid"));
  const HttpReply broken = call("POST", "/v2/repository/models/broken/load");
  EXPECT_EQ(broken.status, 400);
  EXPECT_THAT(broken.body, HasSubstr("failed to load"));
}

}  // namespace
}  // namespace troupe::server
