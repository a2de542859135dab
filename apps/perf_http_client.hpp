#pragma once

// `troupe perf` over HTTP/REST: the model's metadata and the load's connections.

#include <memory>
#include <string>
#include <vector>

#include "apps/perf_endpoint.hpp"
#include "apps/perf_http_body.hpp"
#include "apps/perf_load.hpp"
#include "apps/perf_model.hpp"

namespace troupe::apps {

/// GET /v2/models/NAME[/versions/V]. Throws PerfError when the server cannot be reached, the
/// model is unknown (the server's 404 body in the message) or the reply is not metadata.
ModelMetadata http_model_metadata(const Endpoint& endpoint, const std::string& model,
                                  const std::string& version, double timeout_s);

/// Infer requests (POST /v2/models/NAME[/versions/V]/infer) with `body`, each slot on a
/// keep-alive connection of its own. All connections are driven by one thread (the caller of
/// run()), so the client takes little CPU from a server on the same machine.
std::unique_ptr<InferTransport> make_http_transport(const Endpoint& endpoint,
                                                    const std::string& model,
                                                    const std::string& version, HttpInferBody body,
                                                    std::vector<TensorSpec> outputs,
                                                    double timeout_s);

}  // namespace troupe::apps
