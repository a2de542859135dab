#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace troupe::apps {

/// A model input or output as the server describes it; -1 marks a dynamic dimension.
struct TensorSpec {
  std::string name;
  std::string datatype;  // "FP32", "INT64", ...
  std::vector<int64_t> shape;
};

/// The model metadata of the KServe v2 protocol (GET /v2/models/NAME, gRPC ModelMetadata).
struct ModelMetadata {
  std::string name;
  std::string platform;
  std::vector<std::string> versions;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

/// Reads the metadata's JSON form; throws PerfError naming what is missing or malformed.
ModelMetadata metadata_from_json(const nlohmann::json& body);

/// "x FP32 [1,3,224,224]" for messages.
std::string describe(const TensorSpec& spec);

}  // namespace troupe::apps
