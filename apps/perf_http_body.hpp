#pragma once

// The HTTP/REST infer request of the KServe v2 protocol, as JSON or with the binary tensor data
// extension, and the checks on its reply.

#include <string>
#include <vector>

#include "apps/perf_inputs.hpp"
#include "apps/perf_model.hpp"

namespace troupe::apps {

/// The body every infer request sends (built once: the client spends no time per request on it).
struct HttpInferBody {
  std::string body;
  bool binary = false;
  size_t header_length = 0;  // binary: bytes of the JSON header (Inference-Header-Content-Length)
};

/// JSON: {"id","inputs":[{"name","shape","datatype","data":[...]}]}. Binary: the inputs carry
/// "parameters":{"binary_data_size":N} instead of data and every output of `outputs` is asked
/// for with "binary_data":true; the raw bytes follow the JSON header in input order.
HttpInferBody make_http_infer_body(const std::vector<InputData>& inputs,
                                   const std::vector<TensorSpec>& outputs, bool binary);

/// The problem with an infer reply, "" when there is none: a status other than 200 (with the
/// body), an Inference-Header-Content-Length (`header_length`, "" when absent) that is missing
/// with `binary` or larger than the body. With `full`, the reply is also parsed and must hold
/// every output of `outputs`, each with as many elements as its shape says, and binary outputs
/// whose declared sizes add up to the bytes after the JSON header.
std::string check_http_infer_reply(unsigned status, const std::string& body,
                                   const std::string& header_length, bool binary, bool full,
                                   const std::vector<TensorSpec>& outputs);

}  // namespace troupe::apps
