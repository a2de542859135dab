#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/inference.hpp"
#include "server/server_context.hpp"
#include "troupe/actor_protocol.hpp"

namespace troupe::server {

/// A decoded REST infer request.
struct RestInferRequest {
  std::string id;  // echoed when non-empty
  NamedTensors inputs;
  std::vector<std::string> outputs;         // requested outputs (empty: all)
  std::vector<std::string> binary_outputs;  // outputs to return as binary data
  bool all_outputs_binary = false;          // request parameter binary_data_output
  RequestScheduling scheduling;             // request parameters priority, timeout (µs)
};

/// Decodes a KServe v2 infer request body: a JSON header of `header_length` bytes (the whole
/// body without the binary extension) followed by the inputs' binary data in input order.
/// Throws ServeError(bad_request) naming the field that is malformed or outside `limits`.
RestInferRequest decode_infer_request(std::string_view body, std::optional<size_t> header_length,
                                      const ServerLimits& limits);

/// An encoded REST infer response: the body and, when it carries binary outputs, the JSON
/// header's length (Inference-Header-Content-Length).
struct RestInferResponse {
  std::string body;
  std::optional<size_t> header_length;
};

/// Encodes outputs (in `order`, the model's output order) as a KServe v2 infer response.
RestInferResponse encode_infer_response(const std::string& model, const std::string& version,
                                        const RestInferRequest& request,
                                        const NamedTensors& outputs,
                                        const std::vector<std::string>& order);

/// {"error": message}.
std::string error_body(const std::string& message);

/// Throws ServeError(bad_request) when a JSON text nests deeper than `max_depth`, before it is
/// parsed (a deep nesting would exhaust the parser's stack).
void check_json_depth(std::string_view text, int max_depth);

}  // namespace troupe::server
