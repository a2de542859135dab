#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "troupe/any.hpp"
#include "troupe/infer_request.hpp"
#include "troupe/model.hpp"
#include "troupe/pipeline_counters.hpp"

namespace troupe {

/// A model compiled for a device: its stage actors, execute streams and kernels. Cheap to copy
/// (copies share the pipeline). The pipeline shuts down when the last copy and the last infer
/// request are gone; requests still in flight are finished first, queued ones cancelled.
class CompiledModel {
 public:
  CompiledModel() = default;

  /// A new request; any number may exist and run at once.
  InferRequest create_infer_request();

  const std::vector<ValueInfo>& inputs() const;
  const std::vector<ValueInfo>& outputs() const;

  /// Read-only properties (NETWORK_NAME, OPTIMAL_NUMBER_OF_INFER_REQUESTS, EXECUTION_DEVICES,
  /// LOADED_FROM_CACHE, SUPPORTED_PROPERTIES) and the effective configuration.
  Any get_property(const std::string& name) const;

  /// Changes scheduling properties while requests run: max_batch_size (AUTO_BATCH_MAX_SIZE, up to
  /// the value compiled with), preferred_batch_size, max_queue_delay_microseconds,
  /// priority_levels, default_priority_level, max_queue_size, default_timeout_microseconds,
  /// timeout_action, allow_timeout_override, priority_queue_policy, priority_aging_microseconds,
  /// and NUM_STREAMS (1..the streams compiled: the
  /// others take no new work, what runs there finishes). They apply to the next decisions; no
  /// request in flight or waiting is dropped, failed or reordered. Other properties are fixed
  /// at compilation (InvalidArgument names the key); all keys are checked before any applies.
  void set_property(const AnyMap& properties);

  /// The executed graph: one node per kernel with attributes "layer_type", "execution_order",
  /// "implementation", "original_names" (the source nodes a fused node stands for), "runs" and,
  /// when PERF_COUNT recorded runs, "mean_real_time_us" and "mean_cpu_time_us".
  std::shared_ptr<const Model> runtime_model() const;

  /// Writes the compiled model as a blob Core::import_model loads: the compiled graph, the kernel
  /// chosen per node and the compile configuration, in an envelope naming troupe's version, the
  /// device, the CPU capabilities it needs and a checksum. Throws InvalidArgument when the stream
  /// fails.
  void export_model(std::ostream& stream) const;

  /// Aggregate statistics of every request run so far (see PipelineStats).
  std::string stats_report() const;
  /// Cumulative request and stage counters since compilation (for servers and metrics).
  PipelineCounters counters() const;

  explicit operator bool() const { return static_cast<bool>(impl_); }

  /// Internal: the implementation behind this handle.
  const std::shared_ptr<detail::CompiledModelImpl>& impl() const { return impl_; }

 private:
  friend class Core;
  explicit CompiledModel(std::shared_ptr<detail::CompiledModelImpl> impl);
  std::shared_ptr<detail::CompiledModelImpl> impl_;
};

}  // namespace troupe
