#include "engine/runtime/cpu_plugin.hpp"

#include <unistd.h>
#include <cstdlib>

#include <algorithm>
#include <fstream>
#include <thread>

#include "engine/graph/compiled_graph.hpp"
#include "kernels/cpu_isa.hpp"
#include "kernels/kernel_registry.hpp"
#include "troupe/error.hpp"

namespace troupe::detail {

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// bf16 inference: where the effective ISA has bf16 instructions (AVX512_BF16 or AMX), or, for
// testing the bf16 path on other AVX-512 CPUs, where TROUPE_BF16_EMULATION=1 lets oneDNN emulate
// it (slower than f32: never a speed-up). The variable is checked on every CPU, also where it is
// not needed, so a malformed value never passes unnoticed on one machine and fails on another.
bool bf16_available() {
  const std::string emulation =
      std::getenv("TROUPE_BF16_EMULATION") ? std::getenv("TROUPE_BF16_EMULATION") : "";
  if (emulation != "" && emulation != "0" && emulation != "1")
    throw InvalidArgument("environment variable TROUPE_BF16_EMULATION='" + emulation +
                          "' is not allowed (allowed: 0, 1, or unset)");
  const kernels::CpuIsa& isa = kernels::effective_cpu_isa();
  return isa.bf16 || (emulation == "1" && isa.avx512);
}

PerformanceMode parse_mode(const Any& v) {
  const std::string s = upper(v.as_string());
  if (s == "LATENCY") return PerformanceMode::latency;
  if (s == "THROUGHPUT" || s == "CUMULATIVE_THROUGHPUT") return PerformanceMode::throughput;
  throw InvalidArgument(std::string("property ") + props::performance_mode + ": '" + v.as_string() +
                        "' is not allowed (allowed: LATENCY, THROUGHPUT)");
}

}  // namespace

bool callbacks_on_stage(const Any& value) {
  const std::string where = upper(value.as_string());
  if (where != "COMPLETION" && where != "STAGE")
    throw InvalidArgument(std::string("property ") + props::callback_thread + ": '" +
                          value.as_string() + "' is not allowed (allowed: COMPLETION, STAGE)");
  return where == "STAGE";
}

const std::vector<std::string>& CpuPlugin::config_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> v = {props::device_id,
                                  props::enable_profiling,
                                  props::num_streams,
                                  props::inference_num_threads,
                                  props::performance_mode,
                                  props::num_requests,
                                  props::disable_transformations,
                                  props::exclusive_async_requests,
                                  props::inference_precision,
                                  props::execution_mode,
                                  props::max_requests_in_flight,
                                  props::callback_thread,
                                  props::auto_batch_max_size,
                                  props::cache_dir};
    for (const auto& k : scheduling_property_names()) v.push_back(k);
    return v;
  }();
  return keys;
}

const std::vector<std::string>& CpuPlugin::supported_properties() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> v = {props::supported_properties, props::available_devices,
                                  props::device_full_name, props::device_capabilities,
                                  props::range_for_async_infer_requests};
    for (const auto& k : config_keys()) v.push_back(k);
    return v;
  }();
  return all;
}

int CpuPlugin::hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

std::vector<std::string> CpuPlugin::capabilities() {
  // What the effective ISA allows (ONEDNN_MAX_CPU_ISA caps it), not what cpuid reports.
  const kernels::CpuIsa& isa = kernels::effective_cpu_isa();
  std::vector<std::string> caps = {"FP32", "INT8", "EXPORT_IMPORT"};
  if (isa.avx2) caps.push_back("AVX2");
  if (isa.avx512) caps.push_back("AVX512");
  if (isa.vnni) caps.push_back("VNNI");
  if (isa.bf16) caps.push_back("BF16");
  if (isa.amx) caps.push_back("AMX");
  return caps;
}

std::string CpuPlugin::full_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(pos + 2);
    }
  }
  return "CPU";
}

CpuPlugin::CpuPlugin() = default;

void CpuPlugin::check(const std::string& key, const Any& value) {
  const auto& keys = config_keys();
  if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
    const auto& all = supported_properties();
    if (std::find(all.begin(), all.end(), key) != all.end())
      throw InvalidArgument("property " + key + " is read-only");
    throw UnknownProperty("unknown property '" + key +
                          "' for device CPU (configurable: " + join(keys) + ")");
  }
  try {
    if (key == props::device_id) {
      if (value.as_string() != "0" && !value.as_string().empty())
        throw InvalidArgument("'" + value.as_string() + "' is not allowed (allowed: 0)");
    } else if (key == props::enable_profiling || key == props::disable_transformations ||
               key == props::exclusive_async_requests) {
      value.as_bool();
    } else if (key == props::num_streams) {
      const std::string s = upper(value.as_string());
      if (s != "AUTO" && s != "NUMA") {
        int64_t n = value.as_int();
        if (n < 1 || n > 64)
          throw InvalidArgument("'" + value.as_string() +
                                "' is not allowed (allowed: AUTO or 1..64)");
      }
    } else if (key == props::inference_num_threads) {
      int64_t n = value.as_int();
      if (n < 0 || n > 1024)
        throw InvalidArgument("'" + value.as_string() +
                              "' is not allowed (allowed: 0 = auto, or 1..1024)");
    } else if (key == props::performance_mode) {
      parse_mode(value);
    } else if (key == props::num_requests) {
      if (value.as_int() < 0)
        throw InvalidArgument("'" + value.as_string() + "' is not allowed (allowed: >= 0)");
    } else if (key == props::inference_precision) {
      ElementType t = element_type_from_string(value.as_string());
      if (t != ElementType::f32 && t != ElementType::bf16)
        throw InvalidArgument("'" + value.as_string() + "' is not allowed (allowed: f32, bf16)");
    } else if (key == props::execution_mode) {
      const std::string mode = upper(value.as_string());
      if (mode != "PERFORMANCE" && mode != "ACCURACY")
        throw InvalidArgument("'" + value.as_string() +
                              "' is not allowed (allowed: PERFORMANCE, ACCURACY)");
    } else if (key == props::cache_dir) {
      const auto* path = std::get_if<std::string>(&value.storage());
      if (!path || path->find('\0') != std::string::npos)
        throw InvalidArgument("'" + value.as_string() +
                              "' is not allowed (allowed: a directory path)");
    } else if (key == props::max_requests_in_flight) {
      int64_t n = value.as_int();
      if (n < 1 || n > 4096)
        throw InvalidArgument("'" + value.as_string() + "' is not allowed (allowed: 1..4096)");
    } else if (key == props::callback_thread) {
      callbacks_on_stage(value);
    } else if (is_scheduling_property(key)) {
      SchedulingPolicy scratch;
      apply_scheduling_property(scratch, key, value);
    } else if (key == props::auto_batch_max_size) {
      int64_t n = value.as_int();
      if (n < 1 || n > 256)
        throw InvalidArgument("'" + value.as_string() + "' is not allowed (allowed: 1..256)");
    }
  } catch (const UnknownProperty&) {
    throw;
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    if (what.rfind("property ", 0) == 0) throw;
    throw InvalidArgument("property " + key + ": " + what);
  }
}

void CpuPlugin::set_property(const AnyMap& properties) {
  for (const auto& [key, value] : properties) check(key, value);
  for (const auto& [key, value] : properties) config_[key] = value;
}

Any CpuPlugin::get_property(const std::string& name) const {
  if (name == props::supported_properties) return Any(supported_properties());
  if (name == props::available_devices) return Any(std::vector<std::string>{"0"});
  if (name == props::device_full_name) return Any(full_name());
  if (name == props::device_capabilities) return Any(capabilities());
  if (name == props::range_for_async_infer_requests)
    return Any(std::vector<std::string>{"1", std::to_string(4 * hardware_threads()), "1"});
  auto it = config_.find(name);
  if (it != config_.end()) return it->second;
  const auto& keys = config_keys();
  if (std::find(keys.begin(), keys.end(), name) != keys.end())
    return resolve({}).to_properties().at(name);
  throw UnknownProperty("unknown property '" + name +
                        "' for device CPU (supported: " + join(supported_properties()) + ")");
}

CompileConfig CpuPlugin::resolve(const AnyMap& overrides) const {
  for (const auto& [key, value] : overrides) check(key, value);
  AnyMap merged = config_;
  for (const auto& [key, value] : overrides) merged[key] = value;
  auto get = [&](const char* key) -> const Any* {
    auto it = merged.find(key);
    return it == merged.end() ? nullptr : &it->second;
  };

  CompileConfig c;
  if (auto v = get(props::device_id)) c.device_id = v->as_string().empty() ? "0" : v->as_string();
  if (auto v = get(props::enable_profiling)) c.enable_profiling = v->as_bool();
  if (auto v = get(props::callback_thread)) c.callbacks_on_stage = callbacks_on_stage(*v);
  if (auto v = get(props::performance_mode)) c.mode = parse_mode(*v);
  if (auto v = get(props::num_requests)) c.num_requests_hint = static_cast<int>(v->as_int());
  if (auto v = get(props::disable_transformations)) c.disable_transformations = v->as_bool();
  if (auto v = get(props::exclusive_async_requests)) c.exclusive_async_requests = v->as_bool();
  if (auto v = get(props::execution_mode)) c.execution_mode = upper(v->as_string());
  // An explicit precision wins over the execution mode.
  if (c.execution_mode == "PERFORMANCE" && bf16_available())
    c.inference_precision = ElementType::bf16;
  if (auto v = get(props::inference_precision)) {
    c.inference_precision = element_type_from_string(v->as_string());
    // bf16 only where the CPU computes it natively; otherwise the model runs (and says it runs)
    // f32.
    if (c.inference_precision == ElementType::bf16 && !bf16_available())
      c.inference_precision = ElementType::f32;
  }

  const int cores = hardware_threads();
  int streams = c.mode == PerformanceMode::throughput ? cores : 1;
  if (auto v = get(props::num_streams)) {
    const std::string s = upper(v->as_string());
    if (s != "AUTO" && s != "NUMA") streams = static_cast<int>(v->as_int());
  }
  if (c.exclusive_async_requests) streams = 1;
  int threads = 0;
  if (auto v = get(props::inference_num_threads)) threads = static_cast<int>(v->as_int());
  c.inference_num_threads = threads;
  const int total_threads = threads > 0 ? threads : cores;
  c.num_streams = std::max(1, streams);
  c.threads_per_stream = std::max(1, total_threads / c.num_streams);

  for (const auto& key : scheduling_property_names())
    if (auto v = get(key.c_str())) apply_scheduling_property(c.scheduling, key, *v);
  // max_batch_size is AUTO_BATCH_MAX_SIZE under Triton's name.
  const Any* auto_batch = get(props::auto_batch_max_size);
  const Any* max_batch = get("max_batch_size");
  if (auto_batch && max_batch && auto_batch->as_int() != max_batch->as_int())
    throw InvalidArgument(
        std::string("properties ") + props::auto_batch_max_size + "=" + auto_batch->as_string() +
        " and max_batch_size=" + max_batch->as_string() + " disagree (they are the same setting)");
  if (auto_batch) c.scheduling.max_batch_size = static_cast<int>(auto_batch->as_int());
  c.auto_batch_max_size = c.scheduling.max_batch_size;
  validate(c.scheduling);
  if (auto v = get(props::max_requests_in_flight))
    c.max_in_flight_override = static_cast<int>(v->as_int());
  c.derive_request_counts();
  if (auto v = get(props::cache_dir)) c.cache_dir = v->as_string();
  return c;
}

std::map<std::string, std::string> CpuPlugin::query_model(const Model& model) const {
  std::map<std::string, std::string> supported;
  const auto& registry = kernels::KernelRegistry::instance();
  const detail::KernelRequests requests(model);
  for (const Node& node : model.nodes()) {
    if (registry.has_op(node.op_type) && registry.create(requests(node)))
      supported[node.name] = device_name;
  }
  return supported;
}

void CompileConfig::derive_request_counts() {
  // Enough requests to keep every stream busy while other requests are in the other stages; with
  // batching, a full batch waiting at each stream while another runs.
  const int batch = std::max(1, auto_batch_max_size);
  int optimal = mode == PerformanceMode::throughput ? 2 * num_streams * batch : 1;
  if (num_requests_hint > 0) optimal = std::min(optimal, num_requests_hint);
  optimal_requests = std::max(1, optimal);
  max_in_flight = max_in_flight_override > 0
                      ? max_in_flight_override
                      : std::max(4 * num_streams * batch, 2 * optimal_requests);
  derive_scheduler_counts();
}

void CompileConfig::derive_scheduler_counts() {
  const int batch = std::max(1, auto_batch_max_size);
  scheduling.max_batch_size = std::min(std::max(1, scheduling.max_batch_size), batch);
  if (scheduling.is_default() && batch <= 1) {
    // FIFO admission: a credit is a request.
    slots_per_stream = 2;
    scheduler_credits = max_in_flight;
    credit_per_stream = false;
  } else {
    // A credit is a batch (one request without batching), one per stream: requests queue at the
    // scheduler, where priorities and batching apply, rather than inside the stages, and the next
    // batch forms when a stream frees up, as Triton's does. Measured (2-vCPU EPYC): the ONNX MLP
    // at 64 in flight, 2 streams, batches up to 32: 2 credits 43.1k requests/s (18 per run), 3
    // credits 40.3k (12.8), 4 credits 35.1k (9.9), 6 credits 32.6k (7.1). A high-priority client
    // beside 48 low-priority requests in flight (benchmarks/scheduling/priority_overload.cpp),
    // its p99 over its p99 on the idle model: reduced ResNet-50 2.44x with 2 credits per stream,
    // 1.63x with 1; the MLP 4.25x and 2.86x; total throughput unchanged.
    slots_per_stream = 2 * batch;
    scheduler_credits = num_streams;
    credit_per_stream = true;
  }
}

AnyMap CompileConfig::to_properties() const {
  AnyMap m;
  m[props::device_id] = device_id;
  m[props::enable_profiling] = enable_profiling;
  m[props::performance_mode] = troupe::to_string(mode);
  m[props::num_requests] = num_requests_hint;
  m[props::num_streams] = num_streams;
  m[props::inference_num_threads] = num_streams * threads_per_stream;
  m[props::disable_transformations] = disable_transformations;
  m[props::exclusive_async_requests] = exclusive_async_requests;
  m[props::inference_precision] = std::string(troupe::to_string(inference_precision));
  m[props::execution_mode] = execution_mode;
  m[props::max_requests_in_flight] = max_in_flight;
  m[props::callback_thread] = std::string(callbacks_on_stage ? "STAGE" : "COMPLETION");
  m[props::auto_batch_max_size] = auto_batch_max_size;
  m[props::cache_dir] = cache_dir;
  for (auto& [key, value] : scheduling_properties(scheduling)) m[key] = value;
  return m;
}

}  // namespace troupe::detail

namespace troupe {
std::string to_string(PerformanceMode mode) {
  return mode == PerformanceMode::latency ? "LATENCY" : "THROUGHPUT";
}
}  // namespace troupe
