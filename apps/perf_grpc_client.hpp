#pragma once

// `troupe perf` over gRPC (inference.GRPCInferenceService): the model's metadata and the load,
// every request a unary ModelInfer on one channel.

#include <memory>
#include <string>
#include <vector>

#include "apps/perf_endpoint.hpp"
#include "apps/perf_inputs.hpp"
#include "apps/perf_load.hpp"
#include "apps/perf_model.hpp"

namespace troupe::apps {

/// ModelMetadata. Throws PerfError when the server cannot be reached, the model is unknown (with
/// the server's message) or the call fails otherwise.
ModelMetadata grpc_model_metadata(const Endpoint& endpoint, const std::string& model,
                                  const std::string& version, double timeout_s);

/// ModelInfer calls with `inputs` as raw_input_contents, the slots' calls outstanding at once on
/// one channel (one HTTP/2 connection) and completed on the thread that calls run().
std::unique_ptr<InferTransport> make_grpc_transport(
    const Endpoint& endpoint, const std::string& model, const std::string& version,
    const std::vector<InputData>& inputs, std::vector<TensorSpec> outputs, double timeout_s);

}  // namespace troupe::apps
