#include "apps/perf_grpc_client.hpp"

#include <chrono>
#include <set>

#include <grpcpp/grpcpp.h>

#include "apps/perf_error.hpp"
#include "server/datatype.hpp"
#include "server/grpc/grpc_runtime.hpp"
#include "server/grpc/grpc_service.grpc.pb.h"
#include "server/grpc/grpc_service.pb.h"

namespace troupe::apps {

namespace {

using Stub = inference::GRPCInferenceService::Stub;

std::chrono::system_clock::time_point deadline_after(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::duration<double>(seconds));
}

const char* code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "status";
  }
}

std::string status_text(const grpc::Status& status) {
  return std::string("gRPC ") + code_name(status.error_code()) + ": " + status.error_message();
}

std::shared_ptr<grpc::Channel> make_channel(const Endpoint& endpoint) {
  // Tensors easily exceed gRPC's default 4 MB receive limit.
  server::disable_grpc_mutex_deadlock_detection();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(endpoint.text(), grpc::InsecureChannelCredentials(), args);
}

// The problem with a reply, "" when there is none: every expected output, and raw contents
// (when used) as many bytes as each output's shape and datatype say.
std::string check_reply(const inference::ModelInferResponse& reply,
                        const std::vector<TensorSpec>& outputs) {
  std::set<std::string> names;
  for (const auto& out : reply.outputs()) names.insert(out.name());
  for (const TensorSpec& spec : outputs)
    if (!names.count(spec.name)) return "reply lacks output '" + spec.name + "'";
  if (reply.raw_output_contents_size() == 0) return {};
  if (reply.raw_output_contents_size() != reply.outputs_size())
    return "reply has " + std::to_string(reply.outputs_size()) + " outputs and " +
           std::to_string(reply.raw_output_contents_size()) + " raw contents";
  for (int i = 0; i < reply.outputs_size(); ++i) {
    const auto& out = reply.outputs(i);
    const auto type = server::element_type_of_datatype(out.datatype());
    if (!type) continue;
    size_t bytes = element_size(*type);
    for (int64_t d : out.shape()) bytes *= static_cast<size_t>(d);
    if (reply.raw_output_contents(i).size() != bytes)
      return "reply output '" + out.name() + "' has " +
             std::to_string(reply.raw_output_contents(i).size()) + " raw bytes, its shape needs " +
             std::to_string(bytes);
  }
  return {};
}

class GrpcTransport final : public InferTransport {
 public:
  GrpcTransport(const Endpoint& endpoint, inference::ModelInferRequest request,
                std::vector<TensorSpec> outputs, double timeout_s)
      : endpoint_(endpoint),
        channel_(make_channel(endpoint)),
        stub_(inference::GRPCInferenceService::NewStub(channel_)),
        request_(std::move(request)),
        outputs_(std::move(outputs)),
        timeout_s_(timeout_s) {}

  ~GrpcTransport() override {
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  void open(int slots) override {
    if (!channel_->WaitForConnected(deadline_after(timeout_s_)))
      throw PerfError("cannot connect to " + endpoint_.text() + " (gRPC)");
    slots_.clear();
    for (int i = 0; i < slots; ++i) slots_.push_back(std::make_unique<Slot>());
  }

  void run(LoadSchedule& schedule) override {
    int in_flight = 0;
    for (auto& s : slots_) in_flight += start(*s, schedule) ? 1 : 0;
    while (in_flight > 0) {
      void* tag = nullptr;
      bool ok = false;
      if (!cq_.Next(&tag, &ok)) break;
      --in_flight;
      Slot& s = *static_cast<Slot*>(tag);
      std::string error;
      if (!s.status.ok())
        error = status_text(s.status);
      else if (!s.checked)
        // Each slot's first reply is checked in full, later ones by status only.
        error = check_reply(s.reply, outputs_);
      if (error.empty()) s.checked = true;
      schedule.finish(s.sent, error.empty(), error);
      in_flight += start(s, schedule) ? 1 : 0;
    }
  }

 private:
  struct Slot {
    std::unique_ptr<grpc::ClientContext> context;  // one per call: gRPC does not reuse them
    std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> call;
    inference::ModelInferResponse reply;
    grpc::Status status;
    PerfClock::time_point sent;
    bool checked = false;
  };

  bool start(Slot& s, LoadSchedule& schedule) {
    if (!schedule.try_start()) return false;
    s.context = std::make_unique<grpc::ClientContext>();
    s.context->set_deadline(deadline_after(timeout_s_));
    s.reply.Clear();
    s.sent = PerfClock::now();
    s.call = stub_->PrepareAsyncModelInfer(s.context.get(), request_, &cq_);
    s.call->StartCall();
    s.call->Finish(&s.reply, &s.status, &s);
    return true;
  }

  Endpoint endpoint_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Stub> stub_;
  const inference::ModelInferRequest request_;
  std::vector<TensorSpec> outputs_;
  double timeout_s_;
  grpc::CompletionQueue cq_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace

ModelMetadata grpc_model_metadata(const Endpoint& endpoint, const std::string& model,
                                  const std::string& version, double timeout_s) {
  const auto channel = make_channel(endpoint);
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  inference::ModelMetadataRequest request;
  request.set_name(model);
  request.set_version(version);
  inference::ModelMetadataResponse reply;
  grpc::ClientContext context;
  context.set_deadline(deadline_after(timeout_s));
  const grpc::Status status = stub->ModelMetadata(&context, request, &reply);
  const std::string what = "model '" + model + "'" + (version.empty() ? "" : " version " + version);
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      channel->GetState(false) != GRPC_CHANNEL_READY)
    throw PerfError("cannot connect to " + endpoint.text() + ": " + status_text(status));
  if (status.error_code() == grpc::StatusCode::NOT_FOUND)
    throw PerfError(what + " not found: " + status_text(status));
  if (!status.ok()) throw PerfError("metadata of " + what + ": " + status_text(status));

  ModelMetadata m;
  m.name = reply.name();
  m.platform = reply.platform();
  m.versions.assign(reply.versions().begin(), reply.versions().end());
  for (const auto& t : reply.inputs())
    m.inputs.push_back({t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}});
  for (const auto& t : reply.outputs())
    m.outputs.push_back({t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}});
  return m;
}

std::unique_ptr<InferTransport> make_grpc_transport(
    const Endpoint& endpoint, const std::string& model, const std::string& version,
    const std::vector<InputData>& inputs, std::vector<TensorSpec> outputs, double timeout_s) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  request.set_model_version(version);
  request.set_id("troupe-perf");
  for (const InputData& in : inputs) {
    auto* tensor = request.add_inputs();
    tensor->set_name(in.spec.name);
    tensor->set_datatype(in.spec.datatype);
    for (int64_t d : in.spec.shape) tensor->add_shape(d);
    request.add_raw_input_contents(static_cast<const char*>(in.tensor.raw_data()),
                                   in.tensor.byte_size());
  }
  return std::make_unique<GrpcTransport>(endpoint, std::move(request), std::move(outputs),
                                         timeout_s);
}

}  // namespace troupe::apps
