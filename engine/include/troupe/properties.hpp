#pragma once

#include <string>
#include <utility>
#include <vector>

#include "troupe/any.hpp"

namespace troupe {

/// Performance hint: what compile_model optimizes the stream/request layout for.
enum class PerformanceMode { latency, throughput };
std::string to_string(PerformanceMode mode);

/// Property names. Read-only ones are marked RO; the rest can be set on the device
/// (Core::set_property) or per compilation (compile_model's properties, which override the
/// device's).
namespace props {
// Device (RO)
inline constexpr const char* supported_properties = "SUPPORTED_PROPERTIES";
inline constexpr const char* available_devices = "AVAILABLE_DEVICES";
inline constexpr const char* device_full_name = "FULL_DEVICE_NAME";
inline constexpr const char* device_capabilities = "OPTIMIZATION_CAPABILITIES";
inline constexpr const char* range_for_async_infer_requests = "RANGE_FOR_ASYNC_INFER_REQUESTS";
// Configuration (RW)
inline constexpr const char* device_id = "DEVICE_ID";
inline constexpr const char* enable_profiling = "PERF_COUNT";
inline constexpr const char* num_streams = "NUM_STREAMS";
inline constexpr const char* inference_num_threads = "INFERENCE_NUM_THREADS";
inline constexpr const char* performance_mode = "PERFORMANCE_HINT";
inline constexpr const char* num_requests = "PERFORMANCE_HINT_NUM_REQUESTS";
inline constexpr const char* disable_transformations = "DISABLE_TRANSFORMATIONS";
inline constexpr const char* exclusive_async_requests = "EXCLUSIVE_ASYNC_REQUESTS";
inline constexpr const char* inference_precision = "INFERENCE_PRECISION_HINT";
/// PERFORMANCE or ACCURACY (OpenVINO's names). Where INFERENCE_PRECISION_HINT is not given,
/// PERFORMANCE computes in bf16 where the CPU has native bf16 instructions (AVX512_BF16, AMX) and
/// in f32 elsewhere; ACCURACY keeps f32. troupe's default is ACCURACY: unlike OpenVINO's CPU
/// plugin, the precision a model computes in never changes with the machine unless asked to.
inline constexpr const char* execution_mode = "EXECUTION_MODE_HINT";
/// Where a request's callback (InferRequest::set_callback) runs: COMPLETION (the default), on the
/// compiled model's completion thread, one callback at a time, so a slow or blocking callback
/// delays only other callbacks; or STAGE, on the thread of the stage that finished the request,
/// without the hop to that thread: for callbacks that return at once (record, restart the
/// request, hand the result on). With STAGE, callbacks of different requests may run at the same
/// time on different threads, and one must neither block nor wait for another request (a stage
/// thread would wait with it); Python callbacks, which take the GIL, belong on COMPLETION. A
/// tiny model under load gains most (an MLP of 20 us: 1.75x the
/// requests/s at the throughput hint).
inline constexpr const char* callback_thread = "CALLBACK_THREAD";
/// Upper bound of requests inside one compiled model's pipeline at once (credits).
inline constexpr const char* max_requests_in_flight = "MAX_REQUESTS_IN_FLIGHT";
/// Batching by the scheduler, the same setting as Triton's name `max_batch_size`: up to this many
/// waiting requests run as one batch, concatenated along their leading dimension, and their
/// outputs are split back. Without max_queue_delay_microseconds only requests already waiting
/// are merged. Only requests whose inputs have the same shapes merge, and only for models whose
/// every input and output has a dynamic leading (batch) dimension; the caller asserts that
/// samples along it are independent. 1 (the default) never merges; a compiled model that cannot
/// batch reports 1. The other scheduling properties: README, "Scheduling".
inline constexpr const char* auto_batch_max_size = "AUTO_BATCH_MAX_SIZE";
/// Directory of the model cache used by Core::compile_model(model_path, ...); empty = no cache.
inline constexpr const char* cache_dir = "CACHE_DIR";
// Compiled model (RO)
inline constexpr const char* model_name = "NETWORK_NAME";
inline constexpr const char* optimal_number_of_infer_requests = "OPTIMAL_NUMBER_OF_INFER_REQUESTS";
inline constexpr const char* execution_devices = "EXECUTION_DEVICES";
inline constexpr const char* loaded_from_cache = "LOADED_FROM_CACHE";
// Remote compiled models (Core::connect_remote / connect_replicas)
/// Milliseconds a replica may take to answer one request (default: NodeOptions::request_timeout).
inline constexpr const char* remote_timeout_ms = "REMOTE_TIMEOUT_MS";
/// Read-only counters of a remote model's router: requests sent to a replica, sent again after
/// a replica was lost, failed because none answered; replicas lost and found again.
inline constexpr const char* remote_sent_requests = "REMOTE_SENT_REQUESTS";
inline constexpr const char* remote_retried_requests = "REMOTE_RETRIED_REQUESTS";
inline constexpr const char* remote_unavailable_requests = "REMOTE_UNAVAILABLE_REQUESTS";
inline constexpr const char* remote_replicas_lost = "REMOTE_REPLICAS_LOST";
inline constexpr const char* remote_reconnects = "REMOTE_RECONNECTS";
}  // namespace props

/// A property map is written as `{{props::num_streams, 2}, {props::performance_mode,
/// "THROUGHPUT"}}`.
using Property = std::pair<std::string, Any>;

}  // namespace troupe
