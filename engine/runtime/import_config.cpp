#include "engine/runtime/import_config.hpp"

#include <algorithm>

#include "engine/runtime/cpu_plugin.hpp"
#include "troupe/error.hpp"
#include "troupe/properties.hpp"

namespace troupe::detail {

bool same_graph_settings(const CompileConfig& a, const CompileConfig& b) {
  return a.inference_precision == b.inference_precision &&
         a.disable_transformations == b.disable_transformations && a.device_id == b.device_id;
}

CompileConfig config_for_import(const CompileConfig& stored, const AnyMap& overrides) {
  const CpuPlugin plugin;  // device-level settings do not apply to an imported blob
  const CompileConfig requested = plugin.resolve(overrides);  // validates keys and values
  auto given = [&](const char* key) { return overrides.count(key) != 0; };

  auto refuse = [&](const char* key, const std::string& stored_value, const std::string& value) {
    throw InvalidArgument(std::string("property ") + key + " = " + value +
                          " cannot be applied on import: the blob was compiled with " + key +
                          " = " + stored_value + " and the compiled graph depends on it; " +
                          "compile the model again instead");
  };
  if (given(props::inference_precision) &&
      requested.inference_precision != stored.inference_precision)
    refuse(props::inference_precision, std::string(to_string(stored.inference_precision)),
           std::string(to_string(requested.inference_precision)));
  if (given(props::disable_transformations) &&
      requested.disable_transformations != stored.disable_transformations)
    refuse(props::disable_transformations, stored.disable_transformations ? "true" : "false",
           requested.disable_transformations ? "true" : "false");
  if (given(props::device_id) && requested.device_id != stored.device_id)
    refuse(props::device_id, stored.device_id, requested.device_id);

  CompileConfig config = stored;
  const bool reshapes_pipeline = given(props::num_streams) || given(props::performance_mode) ||
                                 given(props::inference_num_threads) ||
                                 given(props::num_requests) ||
                                 given(props::exclusive_async_requests);
  if (reshapes_pipeline) {
    // Re-derive streams, threads, requests and credits the way compilation does, from the stored
    // settings with the overrides on top.
    AnyMap settings;
    settings[props::performance_mode] = troupe::to_string(stored.mode);
    if (!given(props::performance_mode)) settings[props::num_streams] = stored.num_streams;
    settings[props::inference_num_threads] = stored.inference_num_threads;
    settings[props::num_requests] = stored.num_requests_hint;
    settings[props::exclusive_async_requests] = stored.exclusive_async_requests;
    for (const auto& [key, value] : overrides) settings[key] = value;
    const CompileConfig derived = plugin.resolve(settings);
    config.mode = derived.mode;
    config.num_requests_hint = derived.num_requests_hint;
    config.num_streams = derived.num_streams;
    config.threads_per_stream = derived.threads_per_stream;
    config.inference_num_threads = derived.inference_num_threads;
    config.exclusive_async_requests = derived.exclusive_async_requests;
    config.optimal_requests = derived.optimal_requests;
    config.slots_per_stream = derived.slots_per_stream;
    config.max_in_flight = derived.max_in_flight;
  }
  if (given(props::enable_profiling)) config.enable_profiling = requested.enable_profiling;
  if (given(props::callback_thread)) config.callbacks_on_stage = requested.callbacks_on_stage;
  if (given(props::max_requests_in_flight)) config.max_in_flight = requested.max_in_flight;
  if (given(props::cache_dir)) config.cache_dir = requested.cache_dir;
  // Scheduling is not part of the compiled graph: the import's properties choose it.
  config.scheduling = requested.scheduling;
  config.auto_batch_max_size = requested.auto_batch_max_size;
  if (config.auto_batch_max_size > 1 && !given(props::max_requests_in_flight))
    config.max_in_flight =
        std::max(config.max_in_flight, 4 * config.num_streams * config.auto_batch_max_size);
  config.derive_scheduler_counts();
  return config;
}

}  // namespace troupe::detail
