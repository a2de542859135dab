// The KServe v2 REST codec: every datatype in JSON and binary form, and a named error for every
// malformed field.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "server/http/kserve_json.hpp"
#include "server/request_tensors.hpp"
#include "server/serve_error.hpp"

namespace troupe::server {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

ServerLimits limits() {
  return ServerLimits{};
}

void expect_bad(const std::string& body, const std::string& fragment,
                std::optional<size_t> header_length = std::nullopt,
                ServerLimits l = ServerLimits{}) {
  try {
    decode_infer_request(body, header_length, l);
    FAIL() << "accepted: " << body.substr(0, 200);
  } catch (const ServeError& e) {
    EXPECT_EQ(e.code(), ServeErrc::bad_request);
    EXPECT_THAT(e.what(), HasSubstr(fragment)) << body.substr(0, 200);
  }
}

TEST(KserveJson, DecodesFlatAndNestedDataOfEveryDatatype) {
  const json doc = {
      {"id", "r1"},
      {"inputs",
       {{{"name", "a"}, {"datatype", "FP32"}, {"shape", {2, 2}}, {"data", {{1.5, -2}, {3, 4}}}},
        {{"name", "b"}, {"datatype", "INT64"}, {"shape", {3}}, {"data", {-9007199254740993, 0, 7}}},
        {{"name", "c"}, {"datatype", "BOOL"}, {"shape", {2}}, {"data", {true, false}}},
        {{"name", "d"}, {"datatype", "UINT8"}, {"shape", {2}}, {"data", {0, 255}}},
        {{"name", "e"}, {"datatype", "INT8"}, {"shape", {2}}, {"data", {-128, 127}}},
        {{"name", "f"}, {"datatype", "INT32"}, {"shape", {1}}, {"data", {-5}}},
        {{"name", "g"}, {"datatype", "FP64"}, {"shape", {1}}, {"data", {0.1}}},
        {{"name", "h"}, {"datatype", "FP16"}, {"shape", {2}}, {"data", {0.5, -1}}},
        {{"name", "i"}, {"datatype", "BF16"}, {"shape", {1}}, {"data", {2}}},
        {{"name", "j"}, {"datatype", "INT16"}, {"shape", {2}}, {"data", {-32768, 32767}}},
        {{"name", "k"}, {"datatype", "UINT16"}, {"shape", {2}}, {"data", {0, 65535}}},
        {{"name", "l"}, {"datatype", "UINT32"}, {"shape", {1}}, {"data", {4294967295u}}},
        {{"name", "m"},
         {"datatype", "UINT64"},
         {"shape", {2}},
         {"data", {18446744073709551615ull, 0}}}}}};
  const RestInferRequest r = decode_infer_request(doc.dump(), std::nullopt, limits());
  EXPECT_EQ(r.id, "r1");
  ASSERT_EQ(r.inputs.size(), 13u);
  EXPECT_EQ(r.inputs.at("a").shape(), (Shape{2, 2}));
  EXPECT_EQ(r.inputs.at("a").to_vector<float>(), (std::vector<float>{1.5f, -2, 3, 4}));
  EXPECT_EQ(r.inputs.at("b").to_vector<int64_t>(),
            (std::vector<int64_t>{-9007199254740993, 0, 7}));  // exact beyond 2^53
  EXPECT_EQ(r.inputs.at("c").element_type(), ElementType::boolean);
  EXPECT_EQ(r.inputs.at("d").to_vector<uint8_t>(), (std::vector<uint8_t>{0, 255}));
  EXPECT_EQ(r.inputs.at("e").to_vector<int8_t>(), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(r.inputs.at("f").to_vector<int32_t>(), (std::vector<int32_t>{-5}));
  EXPECT_EQ(r.inputs.at("g").to_vector<double>(), (std::vector<double>{0.1}));
  EXPECT_EQ(r.inputs.at("h").element_type(), ElementType::f16);
  EXPECT_EQ(r.inputs.at("h").convert(ElementType::f32).to_vector<float>(),
            (std::vector<float>{0.5f, -1}));
  EXPECT_EQ(r.inputs.at("i").convert(ElementType::f32).to_vector<float>(), (std::vector<float>{2}));
  EXPECT_EQ(r.inputs.at("j").to_vector<int16_t>(), (std::vector<int16_t>{-32768, 32767}));
  EXPECT_EQ(r.inputs.at("k").to_vector<uint16_t>(), (std::vector<uint16_t>{0, 65535}));
  EXPECT_EQ(r.inputs.at("l").to_vector<uint32_t>(), (std::vector<uint32_t>{4294967295u}));
  EXPECT_EQ(r.inputs.at("m").to_vector<uint64_t>(),
            (std::vector<uint64_t>{18446744073709551615ull, 0}));  // exact beyond 2^63
}

TEST(KserveJson, DecodesBinaryTensorsAfterTheHeader) {
  const std::vector<float> a = {1, 2, 3};
  const std::vector<int64_t> b = {-1, 1 << 30};
  const json header = {
      {"inputs",
       {{{"name", "a"},
         {"datatype", "FP32"},
         {"shape", {3}},
         {"parameters", {{"binary_data_size", 12}}}},
        {{"name", "j"}, {"datatype", "INT32"}, {"shape", {1}}, {"data", {9}}},
        {{"name", "b"},
         {"datatype", "INT64"},
         {"shape", {2}},
         {"parameters", {{"binary_data_size", 16}}}}}},
      {"outputs", {{{"name", "y"}, {"parameters", {{"binary_data", true}}}}, {{"name", "z"}}}}};
  std::string body = header.dump();
  const size_t length = body.size();
  body.append(reinterpret_cast<const char*>(a.data()), 12);
  body.append(reinterpret_cast<const char*>(b.data()), 16);
  const RestInferRequest r = decode_infer_request(body, length, limits());
  EXPECT_EQ(r.inputs.at("a").to_vector<float>(), a);
  EXPECT_EQ(r.inputs.at("b").to_vector<int64_t>(), b);
  EXPECT_EQ(r.inputs.at("j").to_vector<int32_t>(), (std::vector<int32_t>{9}));
  EXPECT_EQ(r.outputs, (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ(r.binary_outputs, (std::vector<std::string>{"y"}));

  expect_bad(body.substr(0, body.size() - 1), "binary_data_size", length);
  expect_bad(body + "x", "1 bytes of binary data follow the inputs that no input claims", length);
  expect_bad(body, "larger than the body", body.size() + 1);
  // A binary size that disagrees with the shape names the input and both counts.
  json wrong = header;
  wrong["inputs"][0]["parameters"]["binary_data_size"] = 8;
  std::string wrong_body = wrong.dump();
  const size_t wrong_length = wrong_body.size();
  wrong_body.append(8 + 16, '\0');
  expect_bad(wrong_body, "input 'a': 8 bytes of data, but 3 elements", wrong_length);

  const json bools = {{"inputs",
                       {{{"name", "c"},
                         {"datatype", "BOOL"},
                         {"shape", {3}},
                         {"parameters", {{"binary_data_size", 3}}}}}}};
  const std::string bool_header = bools.dump();
  EXPECT_EQ(
      decode_infer_request(bool_header + std::string("\1\0\1", 3), bool_header.size(), limits())
          .inputs.at("c")
          .byte_size(),
      3u);
  expect_bad(bool_header + std::string("\1\2\0", 3), "BOOL byte 1 is 2", bool_header.size());
}

TEST(KserveJson, MalformedRequestsNameTheField) {
  auto one = [](json input) { return json{{"inputs", {input}}}.dump(); };
  const json ok = {{"name", "x"}, {"datatype", "FP32"}, {"shape", {2}}, {"data", {1, 2}}};
  expect_bad("{not json", "not valid JSON");
  expect_bad("[1]", "must be a JSON object");
  expect_bad("{}", "'inputs' is missing");
  expect_bad(json{{"inputs", {ok, ok}}}.dump(), "input 'x' is given twice");
  expect_bad(one({{"datatype", "FP32"}, {"shape", {1}}, {"data", {1}}}), "'name' is missing");
  expect_bad(one({{"name", "x"}, {"shape", {1}}, {"data", {1}}}), "input 'x': 'datatype'");
  expect_bad(one({{"name", "x"}, {"datatype", "FP8"}, {"shape", {1}}, {"data", {1}}}),
             "datatype 'FP8' is not supported");
  expect_bad(one({{"name", "x"}, {"datatype", "BYTES"}, {"shape", {2}}, {"data", {"a", 1}}}),
             "input 'x': 'data' value 1 (1) is not a string");
  expect_bad(one({{"name", "x"}, {"datatype", "FP32"}, {"data", {1}}}), "input 'x': 'shape'");
  expect_bad(one({{"name", "x"}, {"datatype", "FP32"}, {"shape", {-2}}, {"data", {1}}}),
             "negative dimension -2");
  expect_bad(one({{"name", "x"}, {"datatype", "FP32"}, {"shape", {1.5}}, {"data", {1}}}),
             "non-integer");
  expect_bad(one({{"name", "x"}, {"datatype", "FP32"}, {"shape", {3}}, {"data", {1, 2}}}),
             "has 2 values, its shape [3] needs 3");
  expect_bad(one({{"name", "x"}, {"datatype", "FP32"}, {"shape", {1}}, {"data", {1, 2}}}),
             "more values than its shape holds");
  expect_bad(one({{"name", "x"}, {"datatype", "FP32"}, {"shape", {1}}, {"data", {"1"}}}),
             "is not a number");
  expect_bad(one({{"name", "x"}, {"datatype", "INT8"}, {"shape", {1}}, {"data", {128}}}),
             "out of range for INT8");
  // Negative values never fit the unsigned types, UINT64's top included; UINT16 stops at 65535.
  expect_bad(one({{"name", "x"}, {"datatype", "UINT64"}, {"shape", {1}}, {"data", {-1}}}),
             "out of range for UINT64");
  expect_bad(one({{"name", "x"}, {"datatype", "UINT16"}, {"shape", {1}}, {"data", {65536}}}),
             "out of range for UINT16");
  expect_bad(one({{"name", "x"}, {"datatype", "INT32"}, {"shape", {1}}, {"data", {1.5}}}),
             "is not an integer");
  expect_bad(one({{"name", "x"}, {"datatype", "BOOL"}, {"shape", {1}}, {"data", {1}}}),
             "is not true or false");
  expect_bad(one({{"name", "x"}, {"datatype", "FP32"}, {"shape", {1}}}), "input 'x': 'data'");
  expect_bad(one({{"name", "x"},
                  {"datatype", "FP32"},
                  {"shape", {1}},
                  {"data", {1}},
                  {"parameters", {{"binary_data_size", 4}}}}),
             "both 'data' and 'binary_data_size'");
  expect_bad(json{{"inputs", {ok}}, {"outputs", {{{"nam", "y"}}}}}.dump(), "outputs[0]");
  expect_bad(json{{"inputs", {ok}}, {"id", 5}}.dump(), "'id' must be a string");

  ServerLimits small;
  small.max_tensor_elements = 1000;
  expect_bad(one({{"name", "x"}, {"datatype", "FP32"}, {"shape", {10, 10, 11}}, {"data", {1}}}),
             "more than 1000 elements", std::nullopt, small);
  // A shape whose product overflows int64 is refused before anything is allocated.
  expect_bad(one({{"name", "x"},
                  {"datatype", "FP32"},
                  {"shape", {int64_t{1} << 40, int64_t{1} << 40}},
                  {"data", {1}}}),
             "elements (the limit)");
  std::string deep = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":)";
  deep += std::string(100, '[') + "1" + std::string(100, ']') + "}]}";
  expect_bad(deep, "nests deeper than 32");
}

TEST(KserveJson, EncodesJsonAndBinaryOutputsInModelOrder) {
  RestInferRequest request;
  request.id = "abc";
  request.binary_outputs = {"z"};
  NamedTensors outputs;
  outputs.emplace("y", Tensor::from_vector<float>({2}, {0.1f, -3}));
  outputs.emplace("z", Tensor::from_vector<int64_t>({1, 2}, {7, -8}));
  const RestInferResponse r = encode_infer_response("m", "3", request, outputs, {"z", "y"});
  ASSERT_TRUE(r.header_length.has_value());
  const json doc = json::parse(r.body.substr(0, *r.header_length));
  EXPECT_EQ(doc["model_name"], "m");
  EXPECT_EQ(doc["model_version"], "3");
  EXPECT_EQ(doc["id"], "abc");
  ASSERT_EQ(doc["outputs"].size(), 2u);
  EXPECT_EQ(doc["outputs"][0]["name"], "z");
  EXPECT_EQ(doc["outputs"][0]["datatype"], "INT64");
  EXPECT_EQ(doc["outputs"][0]["shape"], json({1, 2}));
  EXPECT_EQ(doc["outputs"][0]["parameters"]["binary_data_size"], 16);
  EXPECT_EQ(doc["outputs"][1]["datatype"], "FP32");
  EXPECT_EQ(doc["outputs"][1]["data"][0].get<float>(), 0.1f);  // round-trips exactly
  ASSERT_EQ(r.body.size(), *r.header_length + 16);
  int64_t z[2];
  std::memcpy(z, r.body.data() + *r.header_length, 16);
  EXPECT_EQ(z[0], 7);
  EXPECT_EQ(z[1], -8);

  request.binary_outputs.clear();
  const RestInferResponse plain = encode_infer_response("m", "3", request, outputs, {"y", "z"});
  EXPECT_FALSE(plain.header_length.has_value());
  EXPECT_EQ(json::parse(plain.body)["outputs"][1]["data"], json({7, -8}));
}

TEST(KserveJson, ReadsTheSchedulingParametersPriorityAndTimeout) {
  const std::string inputs = R"("inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}])";
  const RestInferRequest r = decode_infer_request(
      "{\"parameters\":{\"priority\":2,\"timeout\":1500}," + inputs + "}", std::nullopt, limits());
  EXPECT_EQ(r.scheduling.priority, 2);
  EXPECT_EQ(r.scheduling.timeout_us, 1500);
  const RestInferRequest plain = decode_infer_request("{" + inputs + "}", std::nullopt, limits());
  EXPECT_EQ(plain.scheduling.priority, 0);
  EXPECT_EQ(plain.scheduling.timeout_us, 0);
  for (const char* bad : {R"({"parameters":{"priority":-1},)", R"({"parameters":{"timeout":"1"},)",
                          R"({"parameters":{"priority":1.5},)"}) {
    try {
      decode_infer_request(std::string(bad) + inputs + "}", std::nullopt, limits());
      ADD_FAILURE() << bad;
    } catch (const ServeError& e) {
      EXPECT_EQ(e.code(), ServeErrc::bad_request);
      EXPECT_THAT(e.what(), ::testing::HasSubstr("must be a non-negative integer")) << bad;
    }
  }
}

TEST(BytesTensors, LengthPrefixedElementsRoundTripAndEveryLieIsNamed) {
  auto binary = [](std::vector<std::string> elements) {
    std::string out;
    for (const auto& e : elements) {
      const auto n = static_cast<uint32_t>(e.size());
      for (int shift = 0; shift < 32; shift += 8) out += static_cast<char>(n >> shift & 0xFF);
      out += e;
    }
    return out;
  };
  const std::vector<std::string> words = {"", "a", std::string(70000, 'z'), std::string("\0b", 2)};
  const std::string bytes = binary(words);
  const Tensor t =
      tensor_from_bytes("w", ElementType::string, Shape{2, 2}, bytes.data(), bytes.size());
  EXPECT_EQ(t.to_vector<std::string>(), words);
  EXPECT_EQ(tensor_bytes(t), bytes);
  auto refusal = [](const std::string& data, int64_t count) {
    try {
      tensor_from_bytes("w", ElementType::string, Shape{count}, data.data(), data.size());
    } catch (const ServeError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(refusal(bytes, 5), HasSubstr("BYTES element 4 has no 4-byte length"));
  EXPECT_THAT(refusal(bytes + "x", 4), HasSubstr("1 bytes follow its 4 BYTES elements"));
  EXPECT_THAT(refusal(bytes.substr(0, bytes.size() - 1), 4),
              HasSubstr("BYTES element 3 is 2 bytes long, only 1 bytes follow"));
  EXPECT_THAT(refusal(binary({"abcdefgh"}), 2), HasSubstr("BYTES element 1 has no 4-byte length"));
  // A billion elements announced in a few bytes: refused before anything is allocated.
  EXPECT_THAT(refusal(bytes, 1000000000), HasSubstr("cannot hold 1000000000 elements"));
}

}  // namespace
}  // namespace troupe::server
