#pragma once

// A GrpcFrontend on a free port over a repository of small test models, with a client stub, for
// the gRPC front end's tests.

#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../test_util.hpp"
#include "server/datatype.hpp"
#include "server/grpc/grpc_frontend.hpp"
#include "server/grpc/grpc_service.grpc.pb.h"
#include "server/model_repository.hpp"
#include "server/server_context.hpp"
#include "troupe/actor_interface.hpp"
#include "troupe/core.hpp"
#include "troupe/properties.hpp"
#include "troupe/serialize.hpp"

namespace troupe::test::grpc_server {

namespace fs = std::filesystem;

constexpr int64_t width = 16;

/// "add_relu": x f32 [?, 16] -> y = relu(x + 0.5), z = x * 2 (two outputs, a dynamic batch).
inline std::shared_ptr<Model> make_add_relu_mul_model() {
  ModelBuilder b("add_relu");
  auto x = b.input("x", ElementType::f32, {Shape::dynamic, width});
  auto half =
      b.constant("half", Tensor::from_vector<float>({1, width}, std::vector<float>(width, .5f)));
  auto two =
      b.constant("two", Tensor::from_vector<float>({1, width}, std::vector<float>(width, 2.f)));
  b.output(b.op("Relu", {b.op("Add", {x, half})}), "y");
  b.output(b.op("Mul", {x, two}), "z");
  return b.build();
}

/// The element types a request can carry, each with its own input "in_<type>" of shape [?] and
/// an Identity to "out_<type>", so every decoding path shows in its output.
inline const std::vector<ElementType>& identity_types() {
  static const std::vector<ElementType> types = {
      ElementType::f32, ElementType::f64, ElementType::i64,     ElementType::i32,
      ElementType::i8,  ElementType::u8,  ElementType::boolean, ElementType::f16,
      ElementType::i16, ElementType::u16, ElementType::u32,     ElementType::u64};
  return types;
}

inline std::string type_suffix(ElementType type) {
  return std::string(to_string(type));
}

inline std::shared_ptr<Model> make_identity_model() {
  ModelBuilder b("identities");
  for (ElementType type : identity_types()) {
    auto in = b.input("in_" + type_suffix(type), type, {Shape::dynamic});
    b.output(b.op("Identity", {in}), "out_" + type_suffix(type));
  }
  return b.build();
}

/// A folder removed with everything in it.
class TempFolder {
 public:
  TempFolder() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("troupe_grpc_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline server::ServerLimits default_limits() {
  return {};
}

/// Models "add_relu" and "identities" (version 1 each) served over gRPC on 127.0.0.1.
class TestServer {
 public:
  explicit TestServer(server::ServerLimits limits = {}, const server::TlsFiles& tls = {})
      : repository(core, {}, {{props::max_requests_in_flight, 128}}),
        context{actor_system_of(core), repository, limits} {
    save_model(make_add_relu_mul_model(), (folder.path() / "add_relu.troupe").string());
    save_model(make_identity_model(), (folder.path() / "identities.troupe").string());
    repository.add_model("add_relu", folder.path() / "add_relu.troupe");
    repository.add_model("identities", folder.path() / "identities.troupe");
    if (repository.load_all() != 0) throw std::runtime_error("a test model failed to load");
    frontend = std::make_unique<server::GrpcFrontend>(context, "127.0.0.1", 0, tls);
    if (!tls.enabled()) stub = make_stub(grpc::InsecureChannelCredentials());
  }
  ~TestServer() {
    stub.reset();
    if (frontend) frontend->shutdown();
    repository.unload_all();
  }

  std::string target() const { return "127.0.0.1:" + std::to_string(frontend->port()); }

  /// A client on its own channel; `tls_name` is the name the server's certificate must carry.
  std::unique_ptr<inference::GRPCInferenceService::Stub> make_stub(
      const std::shared_ptr<grpc::ChannelCredentials>& credentials,
      const std::string& tls_name = {}) const {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    if (!tls_name.empty()) args.SetSslTargetNameOverride(tls_name);
    return inference::GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(target(), credentials, args));
  }

  std::shared_ptr<server::ServedModel> model(const std::string& name = "add_relu") const {
    return repository.find(name);
  }

  TempFolder folder;
  Core core;
  server::ModelRepository repository;
  server::ServerContext context;
  std::unique_ptr<server::GrpcFrontend> frontend;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub;
};

/// A client context whose call fails after `seconds` rather than hanging a test.
inline std::unique_ptr<grpc::ClientContext> bounded_context(int seconds = 60) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return context;
}

/// Appends `tensor` as an input whose values travel in raw_input_contents.
inline void add_raw_input(inference::ModelInferRequest& request, const std::string& name,
                          const Tensor& tensor) {
  auto* input = request.add_inputs();
  input->set_name(name);
  input->set_datatype(std::string(server::kserve_datatype(tensor.element_type())));
  for (int64_t d : tensor.shape()) input->add_shape(d);
  const Tensor dense = tensor.contiguous();
  request.add_raw_input_contents(
      std::string(static_cast<const char*>(dense.raw_data()), dense.byte_size()));
}

/// A request to "add_relu" with input x in raw form.
inline inference::ModelInferRequest add_relu_request(const Tensor& x, const std::string& id = {}) {
  inference::ModelInferRequest request;
  request.set_model_name("add_relu");
  request.set_id(id);
  add_raw_input(request, "x", x);
  return request;
}

/// Output `index` of a response as a tensor (its datatype, shape and raw bytes).
inline Tensor output_tensor(const inference::ModelInferResponse& response, int index) {
  const auto& output = response.outputs(index);
  auto type = server::element_type_of_datatype(output.datatype());
  if (!type) throw std::runtime_error("unknown datatype " + output.datatype());
  Tensor t(*type, Shape(std::vector<int64_t>(output.shape().begin(), output.shape().end())));
  const std::string& raw = response.raw_output_contents(index);
  if (raw.size() != t.byte_size()) throw std::runtime_error("raw output size mismatch");
  if (!raw.empty()) std::memcpy(t.raw_data(), raw.data(), raw.size());
  return t;
}

/// Whether two tensors have the same type, shape and bytes.
inline bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.element_type() != b.element_type() || a.shape() != b.shape()) return false;
  const Tensor da = a.contiguous(), db = b.contiguous();
  return da.byte_size() == db.byte_size() &&
         std::memcmp(da.raw_data(), db.raw_data(), da.byte_size()) == 0;
}

/// The outputs of running `inputs` in-process on the served model's compiled model.
inline NamedTensors infer_in_process(const server::ServedModel& model, const NamedTensors& inputs) {
  CompiledModel compiled = model.compiled();
  InferRequest request = compiled.create_infer_request();
  for (const auto& [name, tensor] : inputs) request.set_tensor(name, tensor);
  request.infer();
  NamedTensors outputs;
  for (const ValueInfo& v : compiled.outputs())
    outputs[v.name] = request.get_tensor(v.name).clone();
  return outputs;
}

/// Polls `done` every millisecond for at most `limit`; true once it held.
template <class F>
bool wait_until(F&& done, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace troupe::test::grpc_server
