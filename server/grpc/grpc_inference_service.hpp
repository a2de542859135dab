#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "server/grpc/grpc_service.grpc.pb.h"
#include "server/server_context.hpp"

namespace troupe::server {

/// inference.GRPCInferenceService on gRPC's callback API. Every method returns at once: the
/// metadata and health calls are answered inline, ModelInfer is decoded inline and finished from
/// the model actor's reply (on a CAF worker), so no gRPC thread waits for an inference. No
/// exception leaves a method; each failure is a status (ServeErrc -> grpc_code_of).
///
/// ServerReady is true while the server accepts requests and no model is LOADING (a model that
/// failed to load or was unloaded does not make the server unready; ask ModelReady for it).
/// ModelReady is false for a known model that is not ready (or while shutting down) and
/// NOT_FOUND for a name the repository does not know.
///
/// drain() begins a shutdown: every call from then on is refused with UNAVAILABLE ("the server is
/// shutting down"), and it returns once every ModelInfer call admitted before has been answered.
class InferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  explicit InferenceService(ServerContext& context) : context_(context) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* call,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* call,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* call,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* call,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* call,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* call,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;

  /// Refuses new calls from now on; returns when every admitted ModelInfer call has been
  /// answered, or at `deadline`, with the time the last one was answered.
  std::chrono::steady_clock::time_point drain(std::chrono::steady_clock::time_point deadline);

 private:
  template <class F>
  grpc::ServerUnaryReactor* answer(grpc::CallbackServerContext* call, F&& fill);
  bool enter();  // false while draining; else counts a ModelInfer call in flight
  void leave();  // that call has been answered

  ServerContext& context_;
  std::mutex mutex_;
  std::condition_variable answered_;
  bool draining_ = false;                              // guarded by mutex_
  int in_flight_ = 0;                                  // guarded by mutex_
  std::chrono::steady_clock::time_point last_answer_;  // guarded by mutex_
};

}  // namespace troupe::server
