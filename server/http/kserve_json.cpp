#include "server/http/kserve_json.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "server/datatype.hpp"
#include "server/request_tensors.hpp"
#include "server/serve_error.hpp"
#include "troupe/element_type.hpp"

namespace troupe::server {

using json = nlohmann::json;

namespace {

json json_values(const Tensor& tensor) {
  const Tensor t = tensor.contiguous();
  const int64_t n = t.size();
  json out = json::array();
  auto& arr = out.get_ref<json::array_t&>();
  arr.reserve(static_cast<size_t>(n));
  switch (t.element_type()) {
    case ElementType::f32:
      for (int64_t i = 0; i < n; ++i) arr.emplace_back(t.data<float>()[i]);
      break;
    case ElementType::f64:
      for (int64_t i = 0; i < n; ++i) arr.emplace_back(t.data<double>()[i]);
      break;
    case ElementType::f16:
    case ElementType::bf16: {
      const Tensor f = t.convert(ElementType::f32);
      for (int64_t i = 0; i < n; ++i) arr.emplace_back(f.data<float>()[i]);
      break;
    }
    case ElementType::i8:
      for (int64_t i = 0; i < n; ++i) arr.emplace_back(t.data<int8_t>()[i]);
      break;
    case ElementType::u8:
      for (int64_t i = 0; i < n; ++i) arr.emplace_back(t.data<uint8_t>()[i]);
      break;
    case ElementType::i16:
      for (int64_t i = 0; i < n; ++i) arr.emplace_back(t.data<int16_t>()[i]);
      break;
    case ElementType::u16:
      for (int64_t i = 0; i < n; ++i) arr.emplace_back(t.data<uint16_t>()[i]);
      break;
    case ElementType::u32:
      for (int64_t i = 0; i < n; ++i) arr.emplace_back(t.data<uint32_t>()[i]);
      break;
    case ElementType::u64:
      for (int64_t i = 0; i < n; ++i) arr.emplace_back(t.data<uint64_t>()[i]);
      break;
    case ElementType::i32:
      for (int64_t i = 0; i < n; ++i) arr.emplace_back(t.data<int32_t>()[i]);
      break;
    case ElementType::i64:
      for (int64_t i = 0; i < n; ++i) arr.emplace_back(t.data<int64_t>()[i]);
      break;
    case ElementType::boolean:
      for (int64_t i = 0; i < n; ++i)
        arr.emplace_back(static_cast<const uint8_t*>(t.raw_data())[i] != 0);
      break;
    case ElementType::string:  // text that is not UTF-8 is replaced when the body is written
      for (int64_t i = 0; i < n; ++i) arr.emplace_back(t.data<std::string>()[i]);
      break;
    default:
      break;
  }
  return out;
}

}  // namespace

void check_json_depth(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        throw_bad_request("the JSON body nests deeper than " + std::to_string(max_depth) +
                          " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

RestInferResponse encode_infer_response(const std::string& model, const std::string& version,
                                        const RestInferRequest& request,
                                        const NamedTensors& outputs,
                                        const std::vector<std::string>& order) {
  json doc;
  doc["model_name"] = model;
  doc["model_version"] = version;
  if (!request.id.empty()) doc["id"] = request.id;
  json list = json::array();
  std::string binary;
  bool any_binary = false;
  for (const auto& name : order) {
    auto it = outputs.find(name);
    if (it == outputs.end()) continue;
    const Tensor t = it->second.contiguous();
    json out;
    out["name"] = name;
    out["datatype"] = std::string(kserve_datatype(t.element_type()));
    out["shape"] = t.shape().dims();
    const bool as_binary = request.all_outputs_binary ||
                           std::find(request.binary_outputs.begin(), request.binary_outputs.end(),
                                     name) != request.binary_outputs.end();
    if (as_binary) {
      any_binary = true;
      const std::string bytes = tensor_bytes(t);
      out["parameters"]["binary_data_size"] = bytes.size();
      binary += bytes;
    } else {
      out["data"] = json_values(t);
    }
    list.push_back(std::move(out));
  }
  doc["outputs"] = std::move(list);
  RestInferResponse response;
  response.body = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  if (any_binary) {
    response.header_length = response.body.size();
    response.body += binary;
  }
  return response;
}

std::string error_body(const std::string& message) {
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace troupe::server
