#pragma once

#include <string>
#include <vector>

#include "server/grpc/grpc_service.pb.h"
#include "server/served_model.hpp"
#include "server/server_context.hpp"
#include "troupe/actor_protocol.hpp"

#include "server/inference.hpp"

namespace troupe::server {

/// A ModelInferRequest checked against its model: the input tensors and the outputs to return.
struct DecodedInfer {
  NamedTensors inputs;
  std::vector<std::string> outputs;  // in response order: as requested, else the model's order
  RequestScheduling scheduling;      // request parameters priority, timeout (µs)
};

/// Decodes and validates a request for `model`: every input named once and known to the model,
/// none missing, a supported datatype, a shape within `limits`, values either all in
/// raw_input_contents (one entry per input, in order, exact byte count, BOOL bytes 0 or 1) or all
/// in typed contents, and only outputs the model has. Throws ServeError(bad_request) naming the
/// tensor or field.
DecodedInfer decode_infer_request(const inference::ModelInferRequest& request,
                                  const ServedModel& model, const ServerLimits& limits);

/// Appends `names` of `outputs` to `response` as output metadata plus raw_output_contents (what
/// Triton returns). Throws ServeError(internal) for an output the model did not produce.
void encode_infer_outputs(const NamedTensors& outputs, const std::vector<std::string>& names,
                          inference::ModelInferResponse& response);

}  // namespace troupe::server
