#include "server/grpc/grpc_inference_service.hpp"

#include <algorithm>
#include <utility>

#include "server/datatype.hpp"
#include "server/grpc/grpc_infer_codec.hpp"
#include "server/grpc/grpc_status.hpp"
#include "server/inference.hpp"
#include "troupe/version.hpp"

namespace troupe::server {

namespace {

void fill_tensor_metadata(const ValueInfo& value,
                          inference::ModelMetadataResponse::TensorMetadata& tensor) {
  tensor.set_name(value.name);
  tensor.set_datatype(std::string(kserve_datatype(value.type)));
  for (int64_t d : value.shape) tensor.add_shape(d);  // Shape::dynamic is the protocol's -1
}

grpc::Status shutting_down() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down");
}

}  // namespace

// Answers a call whose response `fill` computes inline (refused while draining).
template <class F>
grpc::ServerUnaryReactor* InferenceService::answer(grpc::CallbackServerContext* call, F&& fill) {
  grpc::ServerUnaryReactor* reactor = call->DefaultReactor();
  bool draining = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    draining = draining_;
  }
  reactor->Finish(draining ? shutting_down() : status_of_call(std::forward<F>(fill)));
  return reactor;
}

bool InferenceService::enter() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (draining_) return false;
  ++in_flight_;
  return true;
}

void InferenceService::leave() {
  std::lock_guard<std::mutex> lock(mutex_);
  --in_flight_;
  last_answer_ = std::chrono::steady_clock::now();
  answered_.notify_all();
}

std::chrono::steady_clock::time_point InferenceService::drain(
    std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  draining_ = true;
  answered_.wait_until(lock, deadline, [this] { return in_flight_ == 0; });
  return last_answer_;
}

grpc::ServerUnaryReactor* InferenceService::ServerLive(grpc::CallbackServerContext* call,
                                                       const inference::ServerLiveRequest*,
                                                       inference::ServerLiveResponse* response) {
  return answer(call, [&] { response->set_live(true); });
}

grpc::ServerUnaryReactor* InferenceService::ServerReady(grpc::CallbackServerContext* call,
                                                        const inference::ServerReadyRequest*,
                                                        inference::ServerReadyResponse* response) {
  return answer(call, [&] {
    const auto index = context_.repository.index();
    const bool loading = std::any_of(index.begin(), index.end(),
                                     [](const ModelIndexEntry& e) { return e.state == "LOADING"; });
    response->set_ready(context_.accepting.load() && !loading);
  });
}

grpc::ServerUnaryReactor* InferenceService::ModelReady(grpc::CallbackServerContext* call,
                                                       const inference::ModelReadyRequest* request,
                                                       inference::ModelReadyResponse* response) {
  return answer(call, [&] {
    try {
      context_.repository.find(request->name(), request->version());
      response->set_ready(context_.accepting.load());
    } catch (const ServeError& e) {
      if (e.code() == ServeErrc::unavailable) {
        response->set_ready(false);
        return;
      }
      // find() knows only loaded or once-loaded models; one still sitting unloaded in the
      // repository folder is known, just not ready.
      const auto index = context_.repository.index();
      const bool known = request->version().empty() &&
                         std::any_of(index.begin(), index.end(), [&](const ModelIndexEntry& row) {
                           return row.name == request->name();
                         });
      if (!known) throw;
      response->set_ready(false);
    }
  });
}

grpc::ServerUnaryReactor* InferenceService::ServerMetadata(
    grpc::CallbackServerContext* call, const inference::ServerMetadataRequest*,
    inference::ServerMetadataResponse* response) {
  return answer(call, [&] {
    response->set_name(server_name);
    response->set_version(library_version);
    for (const std::string& extension : server_extensions()) response->add_extensions(extension);
  });
}

grpc::ServerUnaryReactor* InferenceService::ModelMetadata(
    grpc::CallbackServerContext* call, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  return answer(call, [&] {
    const auto model = context_.repository.find(request->name(), request->version());
    response->set_name(model->name());
    for (const ModelIndexEntry& row : context_.repository.index())
      if (row.name == model->name() && row.state == "READY") response->add_versions(row.version);
    response->set_platform(model->platform());
    for (const ValueInfo& v : model->inputs()) fill_tensor_metadata(v, *response->add_inputs());
    for (const ValueInfo& v : model->outputs()) fill_tensor_metadata(v, *response->add_outputs());
  });
}

grpc::ServerUnaryReactor* InferenceService::ModelInfer(grpc::CallbackServerContext* call,
                                                       const inference::ModelInferRequest* request,
                                                       inference::ModelInferResponse* response) {
  grpc::ServerUnaryReactor* reactor = call->DefaultReactor();
  const int64_t start_ns = steady_now_ns();
  std::shared_ptr<ServedModel> model;
  const bool entered = enter();
  bool handed_off = false;  // the model's reply finishes the call (and leaves)
  const grpc::Status refused = status_of_call([&] {
    model = context_.repository.find(request->model_name(), request->model_version());
    // A request refused before it reached the model still counts as a failure of that model (as
    // in Triton's statistics and the REST front end).
    if (!entered || !context_.accepting.load()) {
      record_failure(*model, ServeErrc::unavailable, start_ns);
      throw ServeError(ServeErrc::unavailable, "the server is shutting down");
    }
    DecodedInfer decoded;
    try {
      decoded = decode_infer_request(*request, *model, context_.limits);
    } catch (const ServeError& e) {
      record_failure(*model, e.code(), start_ns);
      throw;
    }
    ServedModel::Ticket ticket = ServedModel::admit(model);
    response->set_model_name(model->name());
    response->set_model_version(model->version());
    response->set_id(request->id());
    // From here the reply finishes the call; it may do so before this method returns, which the
    // callback API allows. `response` lives until the reactor is done, i.e. after Finish.
    context_.relays.infer_async(
        context_.system, std::move(ticket), std::move(decoded.inputs), decoded.scheduling, start_ns,
        [this, reactor, response, names = std::move(decoded.outputs)](InferenceResult result) {
          reactor->Finish(status_of_call([&] {
            if (result.error) throw *result.error;
            encode_infer_outputs(result.outputs, names, *response);
          }));
          leave();
        });
    handed_off = true;
  });
  if (!refused.ok()) reactor->Finish(refused);
  if (entered && !handed_off) leave();
  return reactor;
}

}  // namespace troupe::server
