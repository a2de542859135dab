#include "apps/bench_model.hpp"

#include <cctype>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "apps/bench_clock.hpp"
#include "apps/bench_input_spec.hpp"
#include "apps/compile_command.hpp"
#include "apps/default_model.hpp"
#include "engine/runtime/compiled_model_impl.hpp"
#include "server/property_json.hpp"
#include "troupe/error.hpp"
#include "troupe/pre_post_processor.hpp"
#include "troupe/properties.hpp"

namespace troupe::apps {

namespace {

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

AnyMap compile_properties(const BenchOptions& o) {
  AnyMap config;
  config[props::performance_mode] = upper(o.hint);
  if (o.nstreams > 0) config[props::num_streams] = o.nstreams;
  if (o.nthreads > 0) config[props::inference_num_threads] = o.nthreads;
  if (o.perf_counts) config[props::enable_profiling] = true;
  if (!o.infer_precision.empty()) config[props::inference_precision] = o.infer_precision;
  if (o.auto_batch > 0) config[props::auto_batch_max_size] = o.auto_batch;
  if (!o.cache_dir.empty()) config[props::cache_dir] = o.cache_dir;
  // The benchmark's callback records a latency and restarts its request: it never blocks, so with
  // several requests in flight it runs on the stage that finished the request, without a hop to
  // the completion thread (the ONNX MLP at the throughput hint: 57 k -> 98 k requests/s, Zen 4).
  // One request at a time is faster on the completion thread, which then takes each restarted
  // request through all the stages itself (Pipeline::submit: 20 against 28 us). -load_config can
  // set either.
  if (upper(o.hint) != "LATENCY" || o.nireq > 1)
    config[props::callback_thread] = std::string("STAGE");
  if (!o.load_config.empty()) {
    std::ifstream in(o.load_config);
    const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
    if (doc.is_discarded() || !doc.is_object())
      throw InvalidArgument("--load_config " + o.load_config + " is not a JSON object");
    for (const auto& [device, properties] : doc.items()) {
      if (device != o.device) continue;  // another device's settings, as benchmark_app ignores them
      for (auto& [key, value] :
           server::properties_of_json(properties, o.load_config + " [" + device + "]"))
        config[key] = value;
    }
  }
  return config;
}

bool needs_pre_post(const BenchOptions& o) {
  return !o.input_precision.empty() || !o.output_precision.empty() || !o.mean_values.empty() ||
         !o.scale_values.empty();
}

// -ip/-op/-mean_values/-scale_values as PrePostProcessor steps, which run in the preprocess and
// postprocess stages.
std::shared_ptr<Model> with_pre_post(const std::shared_ptr<Model>& model, const BenchOptions& o) {
  const ValueSpec means = parse_values("-mean_values", o.mean_values);
  const ValueSpec scales = parse_values("-scale_values", o.scale_values);
  const size_t input_count = model->inputs().size();
  const auto has_value = [&](const std::string& name) {
    return static_cast<bool>(model->find_value(name));
  };
  for (const auto& entry : means)
    require_input("-mean_values", entry.first, input_count, has_value);
  for (const auto& entry : scales)
    require_input("-scale_values", entry.first, input_count, has_value);
  PrePostProcessor ppp(model);
  for (size_t k = 0; k < input_count; ++k) {
    const ValueInfo& info = model->value(model->inputs()[k]);
    const auto* mean = values_for(means, info.name, input_count);
    const auto* scale = values_for(scales, info.name, input_count);
    if (o.input_precision.empty() && !mean && !scale) continue;
    auto& input = ppp.input(k);
    if (!o.input_precision.empty()) {
      const ElementType type = element_type_from_string(o.input_precision);
      input.tensor().set_element_type(type);
      if (type != info.type) input.preprocess().convert_element_type(info.type);
    }
    if (mean) input.preprocess().mean(*mean);
    if (scale) input.preprocess().scale(*scale);
  }
  if (!o.output_precision.empty())
    for (size_t k = 0; k < model->outputs().size(); ++k)
      ppp.output(k).tensor().set_element_type(element_type_from_string(o.output_precision));
  return ppp.build();
}

// The model with every input given its static run shape, so the compiled model has static shapes:
// upload and download then convert to and from the layouts and types the kernels keep, which they
// can only do for static shapes.
std::shared_ptr<Model> reshaped(const Model& model, const ShapeSpec& shapes, int64_t batch) {
  auto result = model.clone();
  bool had_dynamic = false;
  for (ValueId in : result->inputs()) {
    ValueInfo& info = result->value(in);
    info.shape = run_shape(info, shapes, result->inputs().size(), batch, had_dynamic);
  }
  try {
    result->validate();
  } catch (const Error& e) {
    throw InvalidArgument(std::string("--reshape: the model does not take these shapes: ") +
                          e.what());
  }
  return result;
}

// A model file is read and compiled, or imported when it is a compiled blob (troupe compile);
// pre/post-processing and --reshape need the model itself.
CompiledModel compile(Core& core, const BenchOptions& o) {
  const AnyMap config = compile_properties(o);
  const bool pre_post = needs_pre_post(o);
  std::shared_ptr<Model> model;
  if (o.reshape && is_blob(o.model_path))
    throw InvalidArgument("--reshape: '" + o.model_path +
                          "' is a compiled blob, whose shapes are fixed; give a model file");
  if (o.model_path.empty())
    model = make_default_model();
  else if (pre_post || o.reshape)
    model = core.read_model(o.model_path);
  if (o.reshape)
    model = reshaped(
        *model, with_file_shapes(parse_shapes(o.shape), read_input_files(o.input_files)), o.batch);
  if (pre_post) model = with_pre_post(model, o);
  return model ? core.compile_model(model, o.device, config)
               : load_compiled_model(core, o.model_path, o.device, config);
}

// CACHE_DIR, or empty when the compiled model does not report one.
std::string cache_dir_of(const CompiledModel& compiled) {
  try {
    return compiled.get_property(props::cache_dir).as_string();
  } catch (const Error&) {
    return {};
  }
}

// The device's full name, or empty when it does not give one.
std::string device_full_name(const Core& core, const std::string& device) {
  try {
    return core.get_property(device, props::device_full_name).as_string();
  } catch (const Error&) {
    return {};
  }
}

int int_property(const CompiledModel& compiled, const std::string& name) {
  return static_cast<int>(compiled.get_property(name).as_int());
}

// The model -m names on the nodes --remote gives (and --local-replica here): compiled there, so
// only the settings of this side's pipeline apply.
CompiledModel connect(Core& core, const BenchOptions& o) {
  if (o.model_path.empty()) throw InvalidArgument("--remote needs -m NAME, the published model");
  if (needs_pre_post(o) || o.reshape || !o.infer_precision.empty() || o.auto_batch > 0 ||
      !o.cache_dir.empty() || !o.load_config.empty() ||
      (o.local_replica.empty() && (o.nstreams > 0 || o.nthreads > 0)))
    throw InvalidArgument(
        "with --remote the model is compiled on its node: -ip/-op/-mean_values/-scale_values, "
        "--reshape, -infer_precision, -auto_batch, -cache_dir and -load_config do not apply "
        "(-nstreams and -nthreads only to a --local-replica)");
  CompiledModel local;
  if (!o.local_replica.empty()) {
    AnyMap local_config;
    local_config[props::performance_mode] = upper(o.hint);
    if (o.nstreams > 0) local_config[props::num_streams] = o.nstreams;
    if (o.nthreads > 0) local_config[props::inference_num_threads] = o.nthreads;
    local = core.compile_model(o.local_replica, o.device, local_config);
  }
  AnyMap properties;
  if (o.perf_counts) properties[props::enable_profiling] = true;
  return core.connect_replicas(o.model_path, o.remote, local, properties);
}

}  // namespace

Core make_bench_core(const BenchOptions& o) {
  if (o.remote.empty()) return Core();
  NodeOptions node;
  if (!o.tls_cert.empty() || !o.tls_key.empty() || !o.tls_ca.empty())
    node.tls = TlsOptions{o.tls_cert, o.tls_key, o.tls_ca, ""};
  return Core(node);
}

BenchModel load_bench_model(Core& core, const BenchOptions& o) {
  BenchModel m;
  const auto compile_start = BenchClock::now();
  m.compiled = o.remote.empty() ? compile(core, o) : connect(core, o);
  m.compile_ms = ms_since(compile_start);

  const CompiledModel& c = m.compiled;
  m.name = c.get_property(props::model_name).as_string();
  m.device_full_name = device_full_name(core, o.device);
  m.performance_hint = c.get_property(props::performance_mode).as_string();
  m.streams = int_property(c, props::num_streams);
  m.threads = int_property(c, props::inference_num_threads);
  m.optimal_requests = int_property(c, props::optimal_number_of_infer_requests);
  m.max_requests_in_flight = int_property(c, props::max_requests_in_flight);
  m.auto_batch_max_size = c.get_property(props::auto_batch_max_size).as_int();
  m.inference_precision = c.get_property(props::inference_precision).as_string();
  m.cache_dir = cache_dir_of(c);
  m.loaded_from_cache = c.get_property(props::loaded_from_cache).as_bool();
  m.execute_on_scheduler = c.impl()->config().execute_on_scheduler;
  m.large_request_threads = m.execute_on_scheduler ? c.impl()->config().large_request_threads : 0;
  m.callbacks_on_stage = c.impl()->config().callbacks_on_stage;
  m.remote = c.impl()->is_remote();
  return m;
}

}  // namespace troupe::apps
