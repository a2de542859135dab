#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "server/server_context.hpp"

namespace troupe::server {

/// An HTTP request as the routes see it (independent of the HTTP library).
struct HttpRequestView {
  std::string_view method;  // "GET", "POST", ...
  std::string_view target;  // path and query
  std::string_view body;
  std::optional<size_t> header_length;  // Inference-Header-Content-Length
};

/// The reply to one request.
struct HttpReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::optional<size_t> header_length;  // Inference-Header-Content-Length (binary outputs)
};

/// Called exactly once per request, from any thread.
using ReplyFunction = std::function<void(HttpReply)>;

/// The KServe v2 REST API: health, server and model metadata, infer (JSON and binary tensors),
/// statistics and the model repository extension. handle() never blocks: inference replies
/// arrive from the model actor, and repository load/unload run on a control thread.
class RestRoutes {
 public:
  explicit RestRoutes(ServerContext& context);
  ~RestRoutes();
  RestRoutes(const RestRoutes&) = delete;
  RestRoutes& operator=(const RestRoutes&) = delete;

  void handle(const HttpRequestView& request, ReplyFunction reply);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::server
