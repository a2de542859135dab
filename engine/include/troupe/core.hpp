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

namespace caf {
class actor_system;
}

namespace troupe {

class Core;
caf::actor_system& actor_system_of(const Core& core);

namespace detail {
class Runtime;
}

/// Entry point: reads models, compiles them for a device and holds device properties.
class Core {
 public:
  /// A Core with its own actor system.
  Core();
  /// A Core whose pipelines run in the caller's CAF actor system (which must outlive every
  /// compiled model made here). See troupe/actor_interface.hpp.
  explicit Core(caf::actor_system& system);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  /// Reads a model file. Throws InvalidArgument naming the path and the formats troupe knows.
  std::shared_ptr<Model> read_model(const std::string& path) const;
  /// Formats read_model understands, e.g. {"onnx"}.
  std::vector<std::string> supported_model_formats() const;

  /// Compiles a model for `device` ("CPU"); `properties` override the device's.
  CompiledModel compile_model(const std::shared_ptr<const Model>& model,
                              const std::string& device = "CPU",
                              const AnyMap& properties = {});
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

  void set_property(const std::string& device, const AnyMap& properties);
  Any get_property(const std::string& device, const std::string& name) const;
  std::vector<std::string> available_devices() const;

 private:
  friend caf::actor_system& actor_system_of(const Core& core);
  std::shared_ptr<detail::Runtime> runtime_;
  std::map<std::string, AnyMap> device_config_;
};

}  // namespace troupe
