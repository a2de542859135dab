#include "server/grpc/grpc_infer_codec.hpp"

#include <algorithm>

#include "server/datatype.hpp"
#include "server/grpc/grpc_tensor_contents.hpp"
#include "server/request_tensors.hpp"
#include "server/serve_error.hpp"

namespace troupe::server {

namespace {

std::string names_of(const std::vector<ValueInfo>& values) {
  std::string list;
  for (const ValueInfo& v : values) list += (list.empty() ? "" : ", ") + v.name;
  return list;
}

bool has_value(const std::vector<ValueInfo>& values, const std::string& name) {
  return std::any_of(values.begin(), values.end(),
                     [&](const ValueInfo& v) { return v.name == name; });
}

// A C++ bool must hold 0 or 1; any other byte would be undefined behaviour in the kernels.
void check_bool_bytes(const std::string& tensor, const std::string& raw) {
  for (size_t i = 0; i < raw.size(); ++i)
    if (raw[i] != 0 && raw[i] != 1)
      throw bad_request("input '" + tensor + "': BOOL byte " + std::to_string(i) + " is " +
                        std::to_string(static_cast<unsigned char>(raw[i])) + " (must be 0 or 1)");
}

Tensor decode_input(const inference::ModelInferRequest& request, int index,
                    const ServerLimits& limits) {
  const auto& input = request.inputs(index);
  const std::string& name = input.name();
  const ElementType type = request_element_type(name, input.datatype());
  const Shape shape = request_shape(name, {input.shape().begin(), input.shape().end()}, limits);
  if (request.raw_input_contents_size() == 0)
    return tensor_from_contents(name, type, shape, input.contents());
  if (has_values(input.contents()))
    throw bad_request(
        "input '" + name +
        "' has contents although the request uses raw_input_contents: send every input "
        "one way");
  const std::string& raw = request.raw_input_contents(index);
  if (type == ElementType::boolean) check_bool_bytes(name, raw);
  return tensor_from_bytes(name, type, shape, raw.data(), raw.size());
}

std::vector<std::string> requested_outputs(const inference::ModelInferRequest& request,
                                           const ServedModel& model) {
  std::vector<std::string> names;
  if (request.outputs_size() == 0) {
    for (const ValueInfo& v : model.outputs()) names.push_back(v.name);
    return names;
  }
  for (const auto& output : request.outputs()) {
    if (!has_value(model.outputs(), output.name()))
      throw bad_request("model '" + model.name() + "' has no output named '" + output.name() +
                        "' (its outputs: " + names_of(model.outputs()) + ")");
    if (std::find(names.begin(), names.end(), output.name()) == names.end())
      names.push_back(output.name());
  }
  return names;
}

}  // namespace

DecodedInfer decode_infer_request(const inference::ModelInferRequest& request,
                                  const ServedModel& model, const ServerLimits& limits) {
  const int raw_count = request.raw_input_contents_size();
  if (raw_count > 0 && raw_count != request.inputs_size())
    throw bad_request("raw_input_contents has " + std::to_string(raw_count) + " entries for " +
                      std::to_string(request.inputs_size()) + " inputs (one per input, in order)");
  DecodedInfer decoded;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const std::string& name = request.inputs(i).name();
    if (name.empty()) throw bad_request("inputs[" + std::to_string(i) + "] has no name");
    if (!has_value(model.inputs(), name))
      throw bad_request("model '" + model.name() + "' has no input named '" + name +
                        "' (its inputs: " + names_of(model.inputs()) + ")");
    if (decoded.inputs.count(name)) throw bad_request("input '" + name + "' is given twice");
    decoded.inputs.emplace(name, decode_input(request, i, limits));
  }
  for (const ValueInfo& v : model.inputs())
    if (!decoded.inputs.count(v.name))
      throw bad_request("input '" + v.name + "' of model '" + model.name() + "' is missing");
  decoded.outputs = requested_outputs(request, model);
  for (const char* key : {"priority", "timeout"}) {
    auto it = request.parameters().find(key);
    if (it == request.parameters().end()) continue;
    int64_t value = -1;
    if (it->second.parameter_choice_case() == inference::InferParameter::kInt64Param)
      value = it->second.int64_param();
    if (value < 0)
      throw bad_request(std::string("request parameter '") + key +
                        "' must be a non-negative int64_param");
    (std::string(key) == "priority" ? decoded.scheduling.priority : decoded.scheduling.timeout_us) =
        value;
  }
  return decoded;
}

void encode_infer_outputs(const NamedTensors& outputs, const std::vector<std::string>& names,
                          inference::ModelInferResponse& response) {
  for (const std::string& name : names) {
    auto it = outputs.find(name);
    if (it == outputs.end())
      throw ServeError(ServeErrc::internal, "the model did not produce output '" + name + "'");
    const Tensor dense = it->second.contiguous();
    auto* output = response.add_outputs();
    output->set_name(name);
    output->set_datatype(std::string(kserve_datatype(dense.element_type())));
    for (int64_t d : dense.shape()) output->add_shape(d);
    *response.add_raw_output_contents() = tensor_bytes(dense);
  }
}

}  // namespace troupe::server
