#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/graph/compile_config.hpp"
#include "troupe/any.hpp"
#include "troupe/model.hpp"

namespace troupe::detail {

/// The CPU device: its read-only properties, the validation of configuration keys and values,
/// and the hint -> streams/threads/requests policy.
class CpuPlugin {
 public:
  static constexpr const char* device_name = "CPU";

  CpuPlugin();

  /// Validates and stores device-level configuration.
  void set_property(const AnyMap& properties);
  /// Device properties (RO and RW).
  Any get_property(const std::string& name) const;

  /// Device config overridden by `overrides`, validated and resolved.
  CompileConfig resolve(const AnyMap& overrides) const;

  /// Node name -> "CPU" for every node some backend can run.
  std::map<std::string, std::string> query_model(const Model& model) const;

  /// Names of the configuration keys (RW).
  static const std::vector<std::string>& config_keys();
  /// Names of all device properties (RO + RW).
  static const std::vector<std::string>& supported_properties();

  static int hardware_threads();
  /// ISA features the CPU reports, e.g. {"FP32","BF16","INT8","AVX512","AMX"} (for
  /// OPTIMIZATION_CAPABILITIES).
  static std::vector<std::string> capabilities();
  static std::string full_name();

 private:
  /// Throws UnknownProperty / InvalidArgument naming the key and the allowed values.
  static void check(const std::string& key, const Any& value);
  AnyMap config_;
};

/// CALLBACK_THREAD's value: true for STAGE, false for COMPLETION (any case); InvalidArgument
/// naming the property and the allowed values otherwise.
bool callbacks_on_stage(const Any& value);

}  // namespace troupe::detail
