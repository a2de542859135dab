#pragma once

#include <cstddef>
#include <istream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "troupe/any.hpp"
#include "troupe/compiled_model.hpp"
#include "troupe/model.hpp"
#include "troupe/remote.hpp"

namespace caf {
class actor_system;
}

namespace troupe {

class Core;
caf::actor_system& actor_system_of(const Core& core);

namespace detail {
class Runtime;
struct Publications;
}  // namespace detail

/// Entry point: reads models, compiles them for a device and holds device properties.
class Core {
 public:
  /// A Core with its own actor system.
  Core();
  /// A Core whose pipelines run in the caller's CAF actor system (which must outlive every
  /// compiled model made here). See troupe/actor_interface.hpp.
  explicit Core(caf::actor_system& system);
  /// A networked Core: its own actor system with CAF's middleman (and TLS when `node.tls` is
  /// set; InvalidArgument names a certificate file it cannot read), so it can publish models and
  /// use other nodes' (publish, connect_remote, connect_replicas).
  explicit Core(const NodeOptions& node);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  /// Reads a model file. Throws InvalidArgument naming the path and the formats troupe knows.
  std::shared_ptr<Model> read_model(const std::string& path) const;
  /// Formats read_model understands, e.g. {"onnx"}.
  std::vector<std::string> supported_model_formats() const;

  /// Compiles a model for `device` ("CPU"); `properties` override the device's.
  CompiledModel compile_model(const std::shared_ptr<const Model>& model,
                              const std::string& device = "CPU", const AnyMap& properties = {});
  /// Reads and compiles a model file. With CACHE_DIR set (here or on the device), the compiled
  /// model is cached under a key of the file's content, the settings the compiled graph depends on,
  /// troupe's version and the CPU; the next call loads it (LOADED_FROM_CACHE = true). A corrupt or
  /// stale entry is replaced, with a warning on stderr.
  CompiledModel compile_model(const std::string& model_path, const std::string& device = "CPU",
                              const AnyMap& properties = {});
  /// A null model: throws InvalidArgument (keeps compile_model(nullptr) unambiguous).
  CompiledModel compile_model(std::nullptr_t, const std::string& device = "CPU",
                              const AnyMap& properties = {}) {
    return compile_model(std::shared_ptr<const Model>(), device, properties);
  }

  /// Loads a blob written by CompiledModel::export_model. Throws FormatError naming what does not
  /// match (magic, format version, troupe version, device, a CPU capability the blob needs,
  /// checksum, truncation with the byte offset). The blob's compile configuration is used;
  /// `properties` may change only settings that shape the pipeline (PERF_COUNT, NUM_STREAMS,
  /// INFERENCE_NUM_THREADS, PERFORMANCE_HINT, PERFORMANCE_HINT_NUM_REQUESTS,
  /// EXCLUSIVE_ASYNC_REQUESTS, MAX_REQUESTS_IN_FLIGHT); a different INFERENCE_PRECISION_HINT,
  /// DISABLE_TRANSFORMATIONS or DEVICE_ID throws InvalidArgument. Properties set on the device with
  /// set_property do not apply. LOADED_FROM_CACHE is false (it is true only for cache hits).
  CompiledModel import_model(std::istream& stream, const std::string& device = "CPU",
                             const AnyMap& properties = {});

  /// Nodes the device can run, by node name -> device name.
  std::map<std::string, std::string> query_model(const std::shared_ptr<const Model>& model,
                                                 const std::string& device = "CPU",
                                                 const AnyMap& properties = {}) const;

  /// Publishes `models` by name on host:port, one port for all of them (`port` 0 picks a free
  /// one); returns the bound port. They stay published, and alive, until the Core is destroyed.
  /// Needs a networked Core. A host off loopback ("0.0.0.0", "" = every interface, or another
  /// machine's address) is refused without TLS, before anything is bound (InvalidArgument);
  /// RemoteUnavailable when the port cannot be bound.
  uint16_t publish(const std::map<std::string, CompiledModel>& models, uint16_t port = 0,
                   const std::string& host = "127.0.0.1");

  /// The model `model` that the node at host:port publishes, as a CompiledModel: same inputs,
  /// outputs and properties, infer requests and counters as a local one (the execute span is the
  /// round trip to the node). Each request has a timeout (REMOTE_TIMEOUT_MS, default
  /// NodeOptions::request_timeout) and fails with RemoteUnavailable when the node is lost.
  /// `properties`: PERF_COUNT, MAX_REQUESTS_IN_FLIGHT, REMOTE_TIMEOUT_MS and the scheduling
  /// properties. Throws RemoteUnavailable when the node cannot be reached, InvalidArgument when
  /// it has no such model.
  CompiledModel connect_remote(const std::string& host, uint16_t port, const std::string& model,
                               const AnyMap& properties = {});
  /// `model` served by several replicas: the nodes at `endpoints` ("host:port") and, if given,
  /// `local` (a model compiled here). Each request goes to the replica with the fewest requests
  /// outstanding; a replica that is lost (disconnected, killed, silent past the timeout) is
  /// avoided, its requests go once to another replica, and it is used again once it answers.
  /// At least one replica must answer now (its description is the model's); all must agree on
  /// inputs and outputs.
  CompiledModel connect_replicas(const std::string& model,
                                 const std::vector<std::string>& endpoints,
                                 const CompiledModel& local = CompiledModel(),
                                 const AnyMap& properties = {});

  void set_property(const std::string& device, const AnyMap& properties);
  Any get_property(const std::string& device, const std::string& name) const;
  std::vector<std::string> available_devices() const;

 private:
  friend caf::actor_system& actor_system_of(const Core& core);
  std::shared_ptr<detail::Runtime> runtime_;
  std::map<std::string, AnyMap> device_config_;
  std::shared_ptr<detail::Publications> publications_;
};

}  // namespace troupe
