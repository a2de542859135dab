#include "troupe/core.hpp"

#include <caf/all.hpp>

#include "engine/graph/compiled_graph.hpp"
#include "engine/runtime/compiled_model_impl.hpp"
#include "engine/runtime/cpu_plugin.hpp"
#include "engine/runtime/import_config.hpp"
#include "engine/runtime/model_cache.hpp"
#include "engine/runtime/runtime.hpp"
#include "serialization/blob/compiled_blob.hpp"
#include "serialization/model_formats.hpp"
#include "troupe/actor_interface.hpp"
#include "troupe/error.hpp"

namespace troupe {

namespace {

void check_device(const std::string& device) {
  if (device != detail::CpuPlugin::device_name && device != "CPU.0")
    throw InvalidArgument("unknown device '" + device + "' (available: CPU)");
}

}  // namespace

Core::Core() : runtime_(std::make_shared<detail::Runtime>()) {}

Core::Core(caf::actor_system& system) : runtime_(std::make_shared<detail::Runtime>(system)) {}

// ~Core, Core(NodeOptions) and the remote calls: core_remote.cpp.

std::shared_ptr<Model> Core::read_model(const std::string& path) const {
  return serialization::read_model_file(path);
}

std::vector<std::string> Core::supported_model_formats() const {
  return serialization::supported_model_formats();
}

namespace {
detail::CpuPlugin make_plugin(const std::map<std::string, AnyMap>& device_config) {
  detail::CpuPlugin plugin;
  auto it = device_config.find("CPU");
  if (it != device_config.end()) plugin.set_property(it->second);
  return plugin;
}
}  // namespace

CompiledModel Core::compile_model(const std::shared_ptr<const Model>& model,
                                  const std::string& device, const AnyMap& properties) {
  if (!model) throw InvalidArgument("compile_model: model is null");
  check_device(device);
  detail::CompileConfig config = make_plugin(device_config_).resolve(properties);
  std::vector<std::unique_ptr<kernels::Kernel>> kernels;
  auto graph = detail::compile_graph(*model, config, &kernels);
  return CompiledModel(std::make_shared<detail::CompiledModelImpl>(
      runtime_, std::move(graph), config, false, std::move(kernels)));
}

CompiledModel Core::compile_model(const std::string& model_path, const std::string& device,
                                  const AnyMap& properties) {
  check_device(device);
  detail::CompileConfig config = make_plugin(device_config_).resolve(properties);
  return CompiledModel(serialization::compile_model_file(model_path, config, runtime_));
}

CompiledModel Core::import_model(std::istream& stream, const std::string& device,
                                 const AnyMap& properties) {
  check_device(device);
  detail::CpuPlugin().resolve(properties);  // a bad key fails before the blob is read
  auto blob = serialization::read_compiled_blob(stream, detail::CpuPlugin::device_name,
                                                detail::CpuPlugin::capabilities());
  auto config = detail::config_for_import(blob.info.config, properties);
  return CompiledModel(
      std::make_shared<detail::CompiledModelImpl>(runtime_, std::move(blob.graph), config, false));
}

std::map<std::string, std::string> Core::query_model(const std::shared_ptr<const Model>& model,
                                                     const std::string& device,
                                                     const AnyMap& properties) const {
  if (!model) throw InvalidArgument("query_model: model is null");
  check_device(device);
  auto plugin = make_plugin(device_config_);
  plugin.resolve(properties);  // validates the keys
  auto validated = model->clone();
  validated->validate();
  return plugin.query_model(*validated);
}

void Core::set_property(const std::string& device, const AnyMap& properties) {
  check_device(device);
  auto plugin = make_plugin(device_config_);
  plugin.set_property(properties);  // throws before anything is stored
  for (const auto& [key, value] : properties) device_config_["CPU"][key] = value;
}

Any Core::get_property(const std::string& device, const std::string& name) const {
  check_device(device);
  return make_plugin(device_config_).get_property(name);
}

std::vector<std::string> Core::available_devices() const {
  return {"CPU"};
}

caf::actor_system& actor_system_of(const Core& core) {
  return const_cast<Core&>(core).runtime_->system();
}

}  // namespace troupe
