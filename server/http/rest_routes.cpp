#include "server/http/rest_routes.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "server/datatype.hpp"
#include "server/http/kserve_json.hpp"
#include "server/http/statistics_json.hpp"
#include "server/inference.hpp"
#include "server/request_tensors.hpp"
#include "server/serve_error.hpp"
#include "troupe/version.hpp"

namespace troupe::server {

using json = nlohmann::json;

namespace {

std::vector<std::string> split_path(std::string_view target) {
  target = target.substr(0, target.find('?'));
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= target.size()) {
    size_t end = target.find('/', start);
    if (end == std::string_view::npos) end = target.size();
    if (end > start) parts.emplace_back(target.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

HttpReply json_reply(int status, const json& doc) {
  return HttpReply{status, doc.dump(-1, ' ', false, json::error_handler_t::replace),
                   "application/json", std::nullopt};
}

HttpReply error_reply(int status, const std::string& message) {
  return HttpReply{status, error_body(message), "application/json", std::nullopt};
}

HttpReply error_reply(const ServeError& e) {
  return error_reply(http_status(e.code()), e.what());
}

json tensor_metadata(const std::vector<ValueInfo>& values) {
  json list = json::array();
  for (const auto& v : values)
    list.push_back({{"name", v.name},
                    {"datatype", std::string(kserve_datatype(v.type))},
                    {"shape", v.shape.dims()}});  // -1 marks a dynamic dimension
  return list;
}

// The model and version a path names: models/NAME[/versions/V]/REST... -> rest index.
struct ModelPath {
  std::string name, version;
  size_t rest = 0;  // index of the first segment after the model (and version)
};

std::optional<ModelPath> model_path(const std::vector<std::string>& parts) {
  if (parts.size() < 3 || parts[0] != "v2" || parts[1] != "models") return std::nullopt;
  ModelPath p;
  p.name = parts[2];
  p.rest = 3;
  if (parts.size() >= 5 && parts[3] == "versions") {
    p.version = parts[4];
    p.rest = 5;
  }
  return p;
}

}  // namespace

struct RestRoutes::Impl {
  explicit Impl(ServerContext& c) : context(c) {}
  ServerContext& context;
  // Load and unload block (compiling, draining): they run here, never on an I/O thread.
  boost::asio::thread_pool control{1};

  bool server_ready() const {
    if (!context.accepting) return false;
    for (const auto& row : context.repository.index())
      if (row.state == "LOADING") return false;
    return true;
  }

  void handle(const HttpRequestView& request, ReplyFunction reply);
  void infer(const ModelPath& path, const HttpRequestView& request, ReplyFunction reply);
  HttpReply model_get(const ModelPath& path, const std::vector<std::string>& parts);
  void repository(const std::vector<std::string>& parts, std::string_view body,
                  ReplyFunction reply);
};

void RestRoutes::Impl::infer(const ModelPath& path, const HttpRequestView& request,
                             ReplyFunction reply) {
  const int64_t start = steady_now_ns();
  std::shared_ptr<ServedModel> model = context.repository.find(path.name, path.version);
  if (!context.accepting) {
    record_failure(*model, ServeErrc::unavailable, start);
    throw ServeError(ServeErrc::unavailable, "the server is shutting down");
  }
  RestInferRequest decoded;
  try {
    decoded = decode_infer_request(request.body, request.header_length, context.limits);
    for (const auto& name : decoded.outputs) {
      bool known = false;
      for (const auto& out : model->outputs()) known = known || out.name == name;
      if (!known)
        throw ServeError(ServeErrc::bad_request,
                         "model '" + model->name() + "' has no output named '" + name + "'");
    }
  } catch (const ServeError& e) {
    record_failure(*model, e.code(), start);
    throw;
  }
  ServedModel::Ticket ticket = ServedModel::admit(model);
  NamedTensors inputs = std::move(decoded.inputs);
  std::vector<std::string> order;
  for (const auto& out : model->outputs()) order.push_back(out.name);
  auto meta = std::make_shared<RestInferRequest>(std::move(decoded));
  const RequestScheduling scheduling = meta->scheduling;
  context.relays.infer_async(
      context.system, std::move(ticket), std::move(inputs), scheduling, start,
      [reply, meta, order = std::move(order), name = model->name(),
       version = model->version()](InferenceResult result) {
        if (result.error) {
          reply(error_reply(*result.error));
          return;
        }
        try {
          NamedTensors outputs = select_outputs(std::move(result.outputs), meta->outputs, name);
          RestInferResponse encoded = encode_infer_response(name, version, *meta, outputs, order);
          HttpReply r;
          r.body = std::move(encoded.body);
          r.header_length = encoded.header_length;
          if (r.header_length) r.content_type = "application/octet-stream";
          reply(std::move(r));
        } catch (const ServeError& e) {
          reply(error_reply(e));
        } catch (const std::exception& e) {
          reply(error_reply(500, std::string("encoding the response failed: ") + e.what()));
        }
      });
}

HttpReply RestRoutes::Impl::model_get(const ModelPath& path,
                                      const std::vector<std::string>& parts) {
  if (parts.size() == path.rest) {  // metadata
    std::shared_ptr<ServedModel> model = context.repository.find(path.name, path.version);
    json versions = json::array();
    for (const auto& m : context.repository.loaded())
      if (m->name() == model->name()) versions.push_back(m->version());
    return json_reply(200, {{"name", model->name()},
                            {"versions", versions},
                            {"platform", model->platform()},
                            {"inputs", tensor_metadata(model->inputs())},
                            {"outputs", tensor_metadata(model->outputs())}});
  }
  if (parts.size() == path.rest + 1 && parts[path.rest] == "ready") {
    try {
      context.repository.find(path.name, path.version);
    } catch (const ServeError& e) {
      if (e.code() == ServeErrc::not_found) throw;
      return error_reply(503, e.what());
    }
    return context.accepting ? HttpReply{200, "", "application/json", std::nullopt}
                             : error_reply(503, "the server is shutting down");
  }
  if (parts.size() == path.rest + 1 && parts[path.rest] == "stats") {
    std::vector<std::shared_ptr<ServedModel>> models;
    if (path.version.empty()) {
      context.repository.find(path.name);  // 404 / 503 for unknown or unloaded
      for (const auto& m : context.repository.loaded())
        if (m->name() == path.name) models.push_back(m);
    } else {
      models.push_back(context.repository.find(path.name, path.version));
    }
    return json_reply(200, statistics_document(models));
  }
  throw ServeError(ServeErrc::not_found, "no route for this path");
}

void RestRoutes::Impl::repository(const std::vector<std::string>& parts, std::string_view body,
                                  ReplyFunction reply) {
  // POST /v2/repository/index, /v2/repository/models/NAME/load|unload
  if (parts.size() == 3 && parts[2] == "index") {
    if (!body.empty()) {
      check_json_depth(body, context.limits.max_json_depth);
      const json doc = json::parse(body.begin(), body.end(), nullptr, false);
      if (doc.is_discarded() || !doc.is_object())
        throw ServeError(ServeErrc::bad_request, "the index request body must be a JSON object");
    }
    json rows = json::array();
    for (const auto& row : context.repository.index()) {
      json r{{"name", row.name}, {"state", row.state}};
      if (!row.version.empty()) r["version"] = row.version;
      if (!row.reason.empty()) r["reason"] = row.reason;
      rows.push_back(std::move(r));
    }
    reply(json_reply(200, rows));
    return;
  }
  if (parts.size() == 5 && parts[2] == "models" && (parts[4] == "load" || parts[4] == "unload")) {
    const std::string name = parts[3];
    const bool load = parts[4] == "load";
    boost::asio::post(control, [this, name, load, reply] {
      try {
        if (load)
          context.repository.load(name);
        else
          context.repository.unload(name);
        reply(HttpReply{200, "", "application/json", std::nullopt});
      } catch (const ServeError& e) {
        reply(error_reply(e));
      } catch (const std::exception& e) {
        reply(error_reply(500, e.what()));
      }
    });
    return;
  }
  throw ServeError(ServeErrc::not_found, "no route for this path");
}

void RestRoutes::Impl::handle(const HttpRequestView& request, ReplyFunction reply) {
  const std::vector<std::string> parts = split_path(request.target);
  const bool get = request.method == "GET";
  const bool post = request.method == "POST";
  auto method_not_allowed = [&](const char* allowed) {
    reply(error_reply(405, "method " + std::string(request.method) + " is not allowed here (use " +
                               allowed + ")"));
  };
  if (parts.empty() || parts[0] != "v2")
    throw ServeError(ServeErrc::not_found,
                     "no route for '" + std::string(request.target.substr(0, 200)) + "'");
  if (parts.size() == 1) {
    if (!get) return method_not_allowed("GET");
    reply(json_reply(200, {{"name", server_name},
                           {"version", library_version},
                           {"extensions", server_extensions()}}));
    return;
  }
  if (parts.size() == 3 && parts[1] == "health") {
    if (!get) return method_not_allowed("GET");
    if (parts[2] == "live") return reply(HttpReply{200, "", "application/json", std::nullopt});
    if (parts[2] == "ready")
      return reply(server_ready() ? HttpReply{200, "", "application/json", std::nullopt}
                                  : error_reply(503, "the server is not ready"));
  }
  if (parts[1] == "repository") {
    if (!post) return method_not_allowed("POST");
    return repository(parts, request.body, std::move(reply));
  }
  if (parts.size() == 3 && parts[1] == "models" && parts[2] == "stats") {
    if (!get) return method_not_allowed("GET");
    return reply(json_reply(200, statistics_document(context.repository.loaded())));
  }
  if (auto path = model_path(parts)) {
    if (parts.size() == path->rest + 1 && parts[path->rest] == "infer") {
      if (!post) return method_not_allowed("POST");
      return infer(*path, request, std::move(reply));
    }
    if (!get) return method_not_allowed("GET");
    return reply(model_get(*path, parts));
  }
  if (parts.size() == 2 && parts[1] == "models") {
    throw ServeError(ServeErrc::not_found, "no route for '/v2/models': name a model");
  }
  throw ServeError(ServeErrc::not_found,
                   "no route for '" + std::string(request.target.substr(0, 200)) + "'");
}

RestRoutes::RestRoutes(ServerContext& context) : impl_(std::make_unique<Impl>(context)) {}

RestRoutes::~RestRoutes() {
  impl_->control.join();
}

void RestRoutes::handle(const HttpRequestView& request, ReplyFunction reply) {
  // Any error thrown before the request reaches a model actor is answered here, once.
  auto replied = std::make_shared<std::atomic<bool>>(false);
  ReplyFunction once = [replied, reply = std::move(reply)](HttpReply r) {
    if (!replied->exchange(true)) reply(std::move(r));
  };
  try {
    impl_->handle(request, once);
  } catch (const ServeError& e) {
    once(error_reply(e));
  } catch (const std::exception& e) {
    once(error_reply(500, e.what()));
  }
}

}  // namespace troupe::server
