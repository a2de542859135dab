#include "apps/perf_http_body.hpp"

#include <cstdint>
#include <exception>
#include <map>

#include <nlohmann/json.hpp>

#include "apps/perf_http_get.hpp"

namespace troupe::apps {

namespace {

using json = nlohmann::json;

int64_t element_count(const json& shape) {
  int64_t n = 1;
  for (const json& d : shape) n *= d.get<int64_t>();
  return n;
}

// Counts the elements of a "data" list, which may be nested as the tensor's shape.
int64_t flat_size(const json& data) {
  if (!data.is_array()) return 1;
  int64_t n = 0;
  for (const json& d : data) n += flat_size(d);
  return n;
}

std::string check_outputs(const json& header, size_t binary_bytes,
                          const std::vector<TensorSpec>& outputs) {
  if (!header.is_object() || !header.contains("outputs") || !header["outputs"].is_array())
    return "reply has no \"outputs\" list: " + abbreviate(header.dump());
  std::map<std::string, const json*> by_name;
  size_t binary_total = 0;
  for (const json& out : header["outputs"]) {
    if (!out.is_object() || !out.contains("name") || !out["name"].is_string() ||
        !out.contains("shape") || !out["shape"].is_array())
      return "reply output without name or shape: " + abbreviate(out.dump());
    by_name[out["name"].get<std::string>()] = &out;
    const json* size = nullptr;
    if (out.contains("parameters") && out["parameters"].contains("binary_data_size"))
      size = &out["parameters"]["binary_data_size"];
    if (size) {
      binary_total += size->get<size_t>();
    } else if (!out.contains("data") || flat_size(out["data"]) != element_count(out["shape"])) {
      return "reply output '" + out["name"].get<std::string>() +
             "' has no data or not as many elements as its shape";
    }
  }
  for (const TensorSpec& spec : outputs)
    if (!by_name.count(spec.name)) return "reply lacks output '" + spec.name + "'";
  if (binary_total != binary_bytes)
    return "reply outputs declare " + std::to_string(binary_total) +
           " binary bytes, the body has " + std::to_string(binary_bytes);
  return {};
}

}  // namespace

HttpInferBody make_http_infer_body(const std::vector<InputData>& inputs,
                                   const std::vector<TensorSpec>& outputs, bool binary) {
  json header = {{"id", "troupe-perf"}, {"inputs", json::array()}};
  for (const InputData& in : inputs) {
    json entry = {{"name", in.spec.name}, {"shape", in.spec.shape}, {"datatype", in.spec.datatype}};
    if (binary)
      entry["parameters"] = {{"binary_data_size", in.tensor.byte_size()}};
    else
      entry["data"] = json_data(in);
    header["inputs"].push_back(std::move(entry));
  }
  if (binary) {
    header["outputs"] = json::array();
    for (const TensorSpec& out : outputs)
      header["outputs"].push_back({{"name", out.name}, {"parameters", {{"binary_data", true}}}});
  }
  HttpInferBody b;
  b.binary = binary;
  b.body = header.dump();
  b.header_length = binary ? b.body.size() : 0;
  if (binary)
    for (const InputData& in : inputs)
      b.body.append(static_cast<const char*>(in.tensor.raw_data()), in.tensor.byte_size());
  return b;
}

std::string check_http_infer_reply(unsigned status, const std::string& body,
                                   const std::string& header_length, bool binary, bool full,
                                   const std::vector<TensorSpec>& outputs) {
  if (status != 200) return "HTTP " + std::to_string(status) + ": " + abbreviate(body);
  if (binary && header_length.empty())
    return "binary reply without Inference-Header-Content-Length";
  size_t json_length = body.size();
  if (!header_length.empty()) {
    try {
      json_length = std::stoull(header_length);
    } catch (const std::exception&) {
      return "bad Inference-Header-Content-Length '" + header_length + "'";
    }
    if (json_length > body.size())
      return "Inference-Header-Content-Length " + header_length + " exceeds the body's " +
             std::to_string(body.size()) + " bytes";
  }
  if (!full) return {};
  try {
    return check_outputs(json::parse(body.begin(), body.begin() + json_length),
                         body.size() - json_length, outputs);
  } catch (const std::exception& e) {
    return std::string("unreadable reply: ") + e.what();
  }
}

}  // namespace troupe::apps
