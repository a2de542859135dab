// Decoding a KServe v2 REST infer request. The request body is the server's hot path (a tiny
// model's 256 floats as JSON are ~5 KB): it is parsed with simdjson, which took 4.3 us for such a
// body where nlohmann::json took 55 us, a third of the server's CPU time per request. Every other
// JSON the server reads or writes (responses, metadata, the control plane) uses nlohmann::json.

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <simdjson.h>

#include "server/datatype.hpp"
#include "server/http/kserve_json.hpp"
#include "server/request_tensors.hpp"
#include "server/serve_error.hpp"
#include "troupe/element_type.hpp"

namespace troupe::server {

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// The parser's buffers grow to the largest body it has parsed and stay: one per thread for
// bodies up to this size, a parser of its own for each larger one (released with it).
constexpr size_t reused_parser_bytes = size_t{1} << 20;

std::string input_field(const std::string& name, const char* field) {
  return "input '" + name + "': '" + field + "'";
}

// A value as the client wrote it, for an error message (shortened: it may be a whole array).
std::string text_of(element value) {
  std::string text = simdjson::minify(value);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

std::optional<element> member(object o, std::string_view key) {
  element value;
  if (o.at_key(key).get(value) != simdjson::SUCCESS) return std::nullopt;
  return value;
}

bool is_integer(element v) {
  return v.type() == element_type::INT64 || v.type() == element_type::UINT64;
}

// A non-negative integer, or nothing.
std::optional<uint64_t> unsigned_value(element v) {
  if (v.type() == element_type::UINT64) return uint64_t(v);
  if (v.type() == element_type::INT64 && int64_t(v) >= 0) return static_cast<uint64_t>(int64_t(v));
  return std::nullopt;
}

// Flattens nested `data` arrays in row-major order, counting as it goes so a body with more
// values than the shape stops early.
void flatten(element data, std::vector<element>& out, int64_t limit, const std::string& name) {
  if (data.type() == element_type::ARRAY) {
    for (element item : array(data)) flatten(item, out, limit, name);
    return;
  }
  if (static_cast<int64_t>(out.size()) >= limit)
    throw_bad_request(input_field(name, "data") + " has more values than its shape holds (" +
                      std::to_string(limit) + ")");
  out.push_back(data);
}

template <class T>
void fill_integers(Tensor& t, const std::vector<element>& values, const std::string& name) {
  T* dst = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) {
    const element v = values[i];
    if (!is_integer(v))
      throw_bad_request(input_field(name, "data") + " value " + std::to_string(i) + " (" +
                        text_of(v) + ") is not an integer");
    const bool negative = v.type() == element_type::INT64 && int64_t(v) < 0;
    // Non-negative values compare as uint64: UINT64's maximum does not fit an int64.
    if (negative ? int64_t(v) < static_cast<int64_t>(std::numeric_limits<T>::min())
                 : *unsigned_value(v) > static_cast<uint64_t>(std::numeric_limits<T>::max()))
      throw_bad_request(input_field(name, "data") + " value " + std::to_string(i) + " (" +
                        text_of(v) + ") is out of range for " +
                        std::string(kserve_datatype(t.element_type())));
    dst[i] = negative ? static_cast<T>(int64_t(v)) : static_cast<T>(*unsigned_value(v));
  }
}

template <class T>
void fill_floats(T* dst, const std::vector<element>& values, const std::string& name) {
  for (size_t i = 0; i < values.size(); ++i) {
    double value;
    if (values[i].get_double().get(value) != simdjson::SUCCESS)
      throw_bad_request(input_field(name, "data") + " value " + std::to_string(i) + " (" +
                        text_of(values[i]) + ") is not a number");
    dst[i] = static_cast<T>(value);
  }
}

Tensor tensor_from_json(const std::string& name, ElementType type, const Shape& shape,
                        element data) {
  std::vector<element> values;
  const int64_t count = shape.element_count();
  values.reserve(static_cast<size_t>(count));
  flatten(data, values, count, name);
  if (static_cast<int64_t>(values.size()) != count)
    throw_bad_request(input_field(name, "data") + " has " + std::to_string(values.size()) +
                      " values, its shape " + shape.to_string() + " needs " +
                      std::to_string(count));
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
        bool value;
        if (values[i].get_bool().get(value) != simdjson::SUCCESS)
          throw_bad_request(input_field(name, "data") + " value " + std::to_string(i) + " (" +
                            text_of(values[i]) + ") is not true or false");
        dst[i] = value ? 1 : 0;
      }
      break;
    }
    case ElementType::string: {
      std::string* dst = t.data<std::string>();
      for (size_t i = 0; i < values.size(); ++i) {
        std::string_view text;
        if (values[i].get_string().get(text) != simdjson::SUCCESS)
          throw_bad_request(input_field(name, "data") + " value " + std::to_string(i) + " (" +
                            text_of(values[i]) + ") is not a string");
        dst[i] = text;
      }
      break;
    }
    default:
      throw_bad_request("input '" + name + "': unsupported datatype");
  }
  return t;
}

// Triton's request parameters "priority" (1 = highest, 0 = the model's default) and "timeout"
// (microseconds, 0 = the model's default).
RequestScheduling scheduling_parameters(object parameters) {
  RequestScheduling s;
  auto read = [&](const char* key, int64_t& into) {
    const std::optional<element> v = member(parameters, key);
    if (!v) return;
    if (v->type() != element_type::INT64 || int64_t(*v) < 0)
      throw_bad_request(std::string("request parameter '") + key +
                        "' must be a non-negative integer");
    into = int64_t(*v);
  };
  read("priority", s.priority);
  read("timeout", s.timeout_us);
  return s;
}

bool binary_flag(element parameters, const char* key, const std::string& where) {
  if (parameters.type() != element_type::OBJECT) return false;
  const std::optional<element> v = member(object(parameters), key);
  if (!v) return false;
  bool value;
  if (v->get_bool().get(value) != simdjson::SUCCESS)
    throw_bad_request(where + ": parameter '" + key + "' must be true or false");
  return value;
}

std::string string_of(element v) {
  return std::string(std::string_view(v));
}

}  // namespace

RestInferRequest decode_infer_request(std::string_view body, std::optional<size_t> header_length,
                                      const ServerLimits& limits) {
  const size_t json_length = header_length.value_or(body.size());
  if (json_length > body.size())
    throw_bad_request("Inference-Header-Content-Length (" + std::to_string(json_length) +
                      ") is larger than the body (" + std::to_string(body.size()) + " bytes)");
  const std::string_view header = body.substr(0, json_length);
  check_json_depth(header, limits.max_json_depth);
  thread_local simdjson::dom::parser reused;
  simdjson::dom::parser own;
  simdjson::dom::parser& parser = header.size() <= reused_parser_bytes ? reused : own;
  element doc;
  if (const auto error = parser.parse(header.data(), header.size()).get(doc))
    throw_bad_request(std::string("the request body is not valid JSON (") +
                      simdjson::error_message(error) + ")");
  if (doc.type() != element_type::OBJECT)
    throw_bad_request("the request body must be a JSON object");
  const object root(doc);

  RestInferRequest request;
  if (const auto id = member(root, "id")) {
    if (id->type() != element_type::STRING) throw_bad_request("'id' must be a string");
    request.id = string_of(*id);
  }
  if (const auto parameters = member(root, "parameters")) {
    if (parameters->type() != element_type::OBJECT)
      throw_bad_request("'parameters' must be an object");
    request.all_outputs_binary =
        binary_flag(*parameters, "binary_data_output", "request parameters");
    request.scheduling = scheduling_parameters(object(*parameters));
  }
  const std::optional<element> inputs = member(root, "inputs");
  if (!inputs || inputs->type() != element_type::ARRAY)
    throw_bad_request("'inputs' is missing or not an array");

  size_t binary_offset = json_length;
  size_t k = 0;
  for (element in_value : array(*inputs)) {
    const std::string where = "inputs[" + std::to_string(k++) + "]";
    if (in_value.type() != element_type::OBJECT) throw_bad_request(where + " is not an object");
    const object in(in_value);
    const std::optional<element> name_value = member(in, "name");
    if (!name_value || name_value->type() != element_type::STRING)
      throw_bad_request(where + ": 'name' is missing");
    const std::string name = string_of(*name_value);
    if (request.inputs.count(name)) throw_bad_request("input '" + name + "' is given twice");
    const std::optional<element> datatype = member(in, "datatype");
    if (!datatype || datatype->type() != element_type::STRING)
      throw_bad_request(input_field(name, "datatype") + " is missing");
    const std::optional<element> shape_value = member(in, "shape");
    if (!shape_value || shape_value->type() != element_type::ARRAY)
      throw_bad_request(input_field(name, "shape") + " is missing or not an array");
    std::vector<int64_t> dims;
    for (element d : array(*shape_value)) {
      if (d.type() != element_type::INT64)
        throw_bad_request(input_field(name, "shape") + " holds a non-integer");
      dims.push_back(int64_t(d));
    }
    const ElementType type = request_element_type(name, string_of(*datatype));
    const Shape shape = request_shape(name, dims, limits);

    std::optional<uint64_t> binary_size;
    if (const auto p = member(in, "parameters")) {
      if (p->type() != element_type::OBJECT)
        throw_bad_request(input_field(name, "parameters") + " must be an object");
      if (const auto size = member(object(*p), "binary_data_size")) {
        binary_size = unsigned_value(*size);
        if (!binary_size)
          throw_bad_request(input_field(name, "binary_data_size") +
                            " must be a non-negative integer");
      }
    }
    const std::optional<element> data = member(in, "data");
    if (binary_size) {
      if (data) throw_bad_request("input '" + name + "' has both 'data' and 'binary_data_size'");
      if (*binary_size > body.size() - binary_offset)
        throw_bad_request(input_field(name, "binary_data_size") + " is " +
                          std::to_string(*binary_size) + " but only " +
                          std::to_string(body.size() - binary_offset) +
                          " bytes of binary data follow");
      request.inputs.emplace(
          name, tensor_from_bytes(name, type, shape, body.data() + binary_offset, *binary_size));
      binary_offset += *binary_size;
    } else {
      if (!data) throw_bad_request(input_field(name, "data") + " is missing");
      request.inputs.emplace(name, tensor_from_json(name, type, shape, *data));
    }
  }
  if (binary_offset != body.size())
    throw_bad_request(std::to_string(body.size() - binary_offset) +
                      " bytes of binary data follow the inputs that no input claims");

  if (const auto outputs = member(root, "outputs")) {
    if (outputs->type() != element_type::ARRAY) throw_bad_request("'outputs' must be an array");
    size_t j = 0;
    for (element out_value : array(*outputs)) {
      const std::string where = "outputs[" + std::to_string(j++) + "]";
      const std::optional<element> name_value = out_value.type() == element_type::OBJECT
                                                    ? member(object(out_value), "name")
                                                    : std::nullopt;
      if (!name_value || name_value->type() != element_type::STRING)
        throw_bad_request(where + ": 'name' is missing");
      const std::string name = string_of(*name_value);
      request.outputs.push_back(name);
      if (const auto p = member(object(out_value), "parameters"))
        if (binary_flag(*p, "binary_data", "output '" + name + "'"))
          request.binary_outputs.push_back(name);
    }
  }
  return request;
}

}  // namespace troupe::server
