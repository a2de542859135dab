#pragma once

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
