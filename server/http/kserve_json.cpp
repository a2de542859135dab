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

[[noreturn]] void bad(const std::string& message) {
  throw ServeError(ServeErrc::bad_request, message);
}

std::string input_field(const std::string& name, const char* field) {
  return "input '" + name + "': '" + field + "'";
}

// Flattens nested `data` arrays in row-major order, counting as it goes so a body with more
// values than the shape stops early.
void flatten(const json& data, std::vector<const json*>& out, int64_t limit,
             const std::string& name) {
  if (data.is_array()) {
    for (const auto& item : data) flatten(item, out, limit, name);
    return;
  }
  if (static_cast<int64_t>(out.size()) >= limit)
    bad(input_field(name, "data") + " has more values than its shape holds (" +
        std::to_string(limit) + ")");
  out.push_back(&data);
}

template <class T>
void fill_integers(Tensor& t, const std::vector<const json*>& values, const std::string& name) {
  T* dst = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) {
    const json& v = *values[i];
    if (!v.is_number_integer())
      bad(input_field(name, "data") + " value " + std::to_string(i) + " (" + v.dump() +
          ") is not an integer");
    // Non-negative values compare as uint64: UINT64's maximum does not fit an int64.
    const bool negative = !v.is_number_unsigned() && v.get<int64_t>() < 0;
    if (negative ? v.get<int64_t>() < static_cast<int64_t>(std::numeric_limits<T>::min())
                 : v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max()))
      bad(input_field(name, "data") + " value " + std::to_string(i) + " (" + v.dump() +
          ") is out of range for " + std::string(kserve_datatype(t.element_type())));
    dst[i] = static_cast<T>(v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>())
                                                   : v.get<int64_t>());
  }
}

template <class T>
void fill_floats(T* dst, const std::vector<const json*>& values, const std::string& name) {
  for (size_t i = 0; i < values.size(); ++i) {
    const json& v = *values[i];
    if (!v.is_number())
      bad(input_field(name, "data") + " value " + std::to_string(i) + " (" + v.dump() +
          ") is not a number");
    dst[i] = static_cast<T>(v.get<double>());
  }
}

Tensor tensor_from_json(const std::string& name, ElementType type, const Shape& shape,
                        const json& data) {
  std::vector<const json*> values;
  const int64_t count = shape.element_count();
  values.reserve(static_cast<size_t>(count));
  flatten(data, values, count, name);
  if (static_cast<int64_t>(values.size()) != count)
    bad(input_field(name, "data") + " has " + std::to_string(values.size()) +
        " values, its shape " + shape.to_string() + " needs " + std::to_string(count));
  Tensor t(type, shape);
  switch (type) {
    case ElementType::f32:
      fill_floats(t.data<float>(), values, name);
      break;
    case ElementType::f64:
      fill_floats(t.data<double>(), values, name);
      break;
    case ElementType::f16:
    case ElementType::bf16: {
      Tensor f(ElementType::f32, shape);
      fill_floats(f.data<float>(), values, name);
      t = f.convert(type);
      break;
    }
    case ElementType::i8:
      fill_integers<int8_t>(t, values, name);
      break;
    case ElementType::u8:
      fill_integers<uint8_t>(t, values, name);
      break;
    case ElementType::i16:
      fill_integers<int16_t>(t, values, name);
      break;
    case ElementType::u16:
      fill_integers<uint16_t>(t, values, name);
      break;
    case ElementType::u32:
      fill_integers<uint32_t>(t, values, name);
      break;
    case ElementType::u64:
      fill_integers<uint64_t>(t, values, name);
      break;
    case ElementType::i32:
      fill_integers<int32_t>(t, values, name);
      break;
    case ElementType::i64:
      fill_integers<int64_t>(t, values, name);
      break;
    case ElementType::boolean: {
      auto* dst = static_cast<uint8_t*>(t.raw_data());
      for (size_t i = 0; i < values.size(); ++i) {
        if (!values[i]->is_boolean())
          bad(input_field(name, "data") + " value " + std::to_string(i) + " (" + values[i]->dump() +
              ") is not true or false");
        dst[i] = values[i]->get<bool>() ? 1 : 0;
      }
      break;
    }
    default:
      bad("input '" + name + "': unsupported datatype");
  }
  return t;
}

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
    default:
      break;
  }
  return out;
}

// Triton's request parameters "priority" (1 = highest, 0 = the model's default) and "timeout"
// (microseconds, 0 = the model's default).
RequestScheduling scheduling_parameters(const json& parameters) {
  RequestScheduling s;
  auto read = [&](const char* key, int64_t& into) {
    if (!parameters.contains(key)) return;
    const json& v = parameters[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      bad(std::string("request parameter '") + key + "' must be a non-negative integer");
    into = v.get<int64_t>();
  };
  read("priority", s.priority);
  read("timeout", s.timeout_us);
  return s;
}

bool binary_flag(const json& parameters, const char* key, const std::string& where) {
  if (!parameters.is_object() || !parameters.contains(key)) return false;
  const json& v = parameters[key];
  if (!v.is_boolean()) bad(where + ": parameter '" + key + "' must be true or false");
  return v.get<bool>();
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
        bad("the JSON body nests deeper than " + std::to_string(max_depth) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

RestInferRequest decode_infer_request(std::string_view body, std::optional<size_t> header_length,
                                      const ServerLimits& limits) {
  const size_t json_length = header_length.value_or(body.size());
  if (json_length > body.size())
    bad("Inference-Header-Content-Length (" + std::to_string(json_length) +
        ") is larger than the body (" + std::to_string(body.size()) + " bytes)");
  const std::string_view header = body.substr(0, json_length);
  check_json_depth(header, limits.max_json_depth);
  const json doc = json::parse(header.begin(), header.end(), nullptr, false);
  if (doc.is_discarded()) bad("the request body is not valid JSON");
  if (!doc.is_object()) bad("the request body must be a JSON object");

  RestInferRequest request;
  if (doc.contains("id")) {
    if (!doc["id"].is_string()) bad("'id' must be a string");
    request.id = doc["id"].get<std::string>();
  }
  if (doc.contains("parameters")) {
    if (!doc["parameters"].is_object()) bad("'parameters' must be an object");
    request.all_outputs_binary =
        binary_flag(doc["parameters"], "binary_data_output", "request parameters");
    request.scheduling = scheduling_parameters(doc["parameters"]);
  }
  if (!doc.contains("inputs") || !doc["inputs"].is_array())
    bad("'inputs' is missing or not an array");

  size_t binary_offset = json_length;
  for (size_t k = 0; k < doc["inputs"].size(); ++k) {
    const json& in = doc["inputs"][k];
    const std::string where = "inputs[" + std::to_string(k) + "]";
    if (!in.is_object()) bad(where + " is not an object");
    if (!in.contains("name") || !in["name"].is_string()) bad(where + ": 'name' is missing");
    const std::string name = in["name"].get<std::string>();
    if (request.inputs.count(name)) bad("input '" + name + "' is given twice");
    if (!in.contains("datatype") || !in["datatype"].is_string())
      bad(input_field(name, "datatype") + " is missing");
    if (!in.contains("shape") || !in["shape"].is_array())
      bad(input_field(name, "shape") + " is missing or not an array");
    std::vector<int64_t> dims;
    for (const auto& d : in["shape"]) {
      if (!d.is_number_integer()) bad(input_field(name, "shape") + " holds a non-integer");
      dims.push_back(d.get<int64_t>());
    }
    const ElementType type = request_element_type(name, in["datatype"].get<std::string>());
    const Shape shape = request_shape(name, dims, limits);

    std::optional<uint64_t> binary_size;
    if (in.contains("parameters")) {
      const json& p = in["parameters"];
      if (!p.is_object()) bad(input_field(name, "parameters") + " must be an object");
      if (p.contains("binary_data_size")) {
        if (!p["binary_data_size"].is_number_unsigned())
          bad(input_field(name, "binary_data_size") + " must be a non-negative integer");
        binary_size = p["binary_data_size"].get<uint64_t>();
      }
    }
    if (binary_size) {
      if (in.contains("data")) bad("input '" + name + "' has both 'data' and 'binary_data_size'");
      if (*binary_size > body.size() - binary_offset)
        bad(input_field(name, "binary_data_size") + " is " + std::to_string(*binary_size) +
            " but only " + std::to_string(body.size() - binary_offset) +
            " bytes of binary data follow");
      request.inputs.emplace(
          name, tensor_from_bytes(name, type, shape, body.data() + binary_offset, *binary_size));
      binary_offset += *binary_size;
    } else {
      if (!in.contains("data")) bad(input_field(name, "data") + " is missing");
      request.inputs.emplace(name, tensor_from_json(name, type, shape, in["data"]));
    }
  }
  if (binary_offset != body.size())
    bad(std::to_string(body.size() - binary_offset) +
        " bytes of binary data follow the inputs that no input claims");

  if (doc.contains("outputs")) {
    if (!doc["outputs"].is_array()) bad("'outputs' must be an array");
    for (size_t k = 0; k < doc["outputs"].size(); ++k) {
      const json& out = doc["outputs"][k];
      const std::string where = "outputs[" + std::to_string(k) + "]";
      if (!out.is_object() || !out.contains("name") || !out["name"].is_string())
        bad(where + ": 'name' is missing");
      const std::string name = out["name"].get<std::string>();
      request.outputs.push_back(name);
      if (out.contains("parameters") &&
          binary_flag(out["parameters"], "binary_data", "output '" + name + "'"))
        request.binary_outputs.push_back(name);
    }
  }
  return request;
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
      out["parameters"]["binary_data_size"] = t.byte_size();
      binary.append(static_cast<const char*>(t.raw_data()), t.byte_size());
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
