#include "apps/perf_model.hpp"

#include "apps/perf_error.hpp"

namespace troupe::apps {

namespace {

using json = nlohmann::json;

TensorSpec tensor_from_json(const json& t, const std::string& where) {
  if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("datatype") ||
      !t["datatype"].is_string() || !t.contains("shape") || !t["shape"].is_array())
    throw PerfError("model metadata: an entry of '" + where +
                    "' lacks a string name, a string datatype or a shape array: " + t.dump());
  TensorSpec spec{t["name"].get<std::string>(), t["datatype"].get<std::string>(), {}};
  for (const json& d : t["shape"]) {
    if (!d.is_number_integer())
      throw PerfError("model metadata: shape of '" + spec.name + "' is not a list of integers");
    spec.shape.push_back(d.get<int64_t>());
  }
  return spec;
}

std::vector<TensorSpec> tensors_from_json(const json& body, const std::string& key) {
  std::vector<TensorSpec> specs;
  if (!body.contains(key)) return specs;
  if (!body[key].is_array()) throw PerfError("model metadata: '" + key + "' is not a list");
  for (const json& t : body[key]) specs.push_back(tensor_from_json(t, key));
  return specs;
}

}  // namespace

ModelMetadata metadata_from_json(const json& body) {
  if (!body.is_object()) throw PerfError("model metadata is not a JSON object: " + body.dump());
  ModelMetadata m;
  if (body.contains("name") && body["name"].is_string()) m.name = body["name"].get<std::string>();
  if (body.contains("platform") && body["platform"].is_string())
    m.platform = body["platform"].get<std::string>();
  if (body.contains("versions") && body["versions"].is_array())
    for (const json& v : body["versions"])
      if (v.is_string()) m.versions.push_back(v.get<std::string>());
  m.inputs = tensors_from_json(body, "inputs");
  m.outputs = tensors_from_json(body, "outputs");
  return m;
}

std::string describe(const TensorSpec& spec) {
  std::string shape;
  for (int64_t d : spec.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
  return spec.name + " " + spec.datatype + " [" + shape + "]";
}

}  // namespace troupe::apps
