#pragma once

#include <string>

#include "engine/graph/scheduling_policy.hpp"
#include "troupe/any.hpp"
#include "troupe/element_type.hpp"
#include "troupe/properties.hpp"

namespace troupe::detail {

/// The resolved configuration of one compilation: device properties overridden by the compile
/// properties, with hints turned into concrete stream/thread/request numbers.
struct CompileConfig {
  std::string device_id = "0";
  bool enable_profiling = false;
  bool callbacks_on_stage = false;  // CALLBACK_THREAD=STAGE
  PerformanceMode mode = PerformanceMode::latency;
  int num_requests_hint = 0;  // 0 = no limit given
  int num_streams = 1;
  int threads_per_stream = 1;
  int inference_num_threads = 0;  // as set (0 = automatic)
  bool disable_transformations = false;
  bool exclusive_async_requests = false;
  ElementType inference_precision = ElementType::f32;
  std::string execution_mode = "ACCURACY";  // EXECUTION_MODE_HINT as given
  int optimal_requests = 1;
  int max_in_flight = 8;           // credits
  int max_in_flight_override = 0;  // as set (0 = derived)
  int slots_per_stream = 2;
  int auto_batch_max_size = 1;  // 1 = no batching; the largest batch the slots can hold
  // The scheduler's rules (dynamic batching, priorities, queue policy). Its max_batch_size may
  // be lowered at run time; auto_batch_max_size is what the model was compiled for.
  SchedulingPolicy scheduling;
  // Batches (one request each without batching) the scheduler lets into the stages at once.
  int scheduler_credits = 8;
  bool credit_per_stream = false;     // scheduler_credits is num_streams (else max_in_flight)
  bool execute_on_scheduler = false;  // execute stages share the scheduler's workers (small model)
  // With execute_on_scheduler: a request with more input elements than this (a dynamic model
  // given large shapes) runs on a thread of its own instead.
  int64_t scheduled_input_elements_limit = 0;
  // The OpenMP threads of such a request (0: threads_per_stream): a model with dynamic inputs
  // that fits on the scheduler at its smallest runs there on one thread, and its requests too
  // large for it on the cores the stream had (fit_threads_to_model).
  int large_request_threads = 0;
  std::string cache_dir;  // empty = no model cache

  /// Derives optimal_requests, slots_per_stream and max_in_flight (unless overridden) from the
  /// mode, streams, request hint and batch size: enough requests to keep every stream busy, and
  /// with batching enough for a full batch to wait while another runs.
  void derive_request_counts();
  /// Derives slots_per_stream and scheduler_credits from max_in_flight and the scheduling policy
  /// (part of derive_request_counts).
  void derive_scheduler_counts();
  /// The streams with an executor: num_streams, and the top priority level's own stream.
  int executor_streams() const { return num_streams + (scheduling.top_priority_stream ? 1 : 0); }

  /// The configuration as properties (what CompiledModel::get_property reports).
  AnyMap to_properties() const;
};

}  // namespace troupe::detail
