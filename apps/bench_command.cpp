#include "apps/bench_command.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <numeric>

#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/compile_command.hpp"
#include "apps/default_model.hpp"
#include "engine/src/compiled_model_impl.hpp"
#include "engine/src/pipeline_stats.hpp"
#include "engine/src/trace_export.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/pre_post_processor.hpp"
#include "troupe/properties.hpp"

namespace troupe::apps {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Linear interpolation between closest ranks, as the pipeline statistics compute it.
double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(sorted.size() - 1, lo + 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] * (1 - frac) + sorted[hi] * frac;
}

std::string describe(const ValueInfo& v) {
  return fmt::format("{} {} {}", v.name, to_string(v.type), v.shape.to_string());
}

json value_json(const ValueInfo& v) {
  return {{"name", v.name}, {"type", std::string(to_string(v.type))}, {"shape", v.shape.dims()}};
}

// "name[a,b,c],other[d,e]" or "[a,b,c]" (for the only input; key "") as the text of each item.
std::map<std::string, std::vector<std::string>> parse_named_lists(const std::string& option,
                                                                  const std::string& text) {
  std::map<std::string, std::vector<std::string>> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t open = text.find('[', pos);
    const size_t close = open == std::string::npos ? open : text.find(']', open);
    if (close == std::string::npos)
      throw InvalidArgument(option + " '" + text + "': expected name[v0,v1,...]");
    const std::string name = text.substr(pos, open - pos);
    std::vector<std::string> dims;
    const std::string list = text.substr(open + 1, close - open - 1);
    size_t p = 0;
    while (p < list.size()) {
      size_t comma = list.find(',', p);
      if (comma == std::string::npos) comma = list.size();
      dims.push_back(list.substr(p, comma - p));
      p = comma + 1;
    }
    if (dims.empty())
      throw InvalidArgument(option + " '" + text + "': empty list for '" + name + "'");
    out[name] = dims;
    pos = close + 1;
    if (pos < text.size() && text[pos] == ',') ++pos;
  }
  return out;
}

std::map<std::string, std::vector<int64_t>> parse_shapes(const std::string& text) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& entry : parse_named_lists("-shape", text)) {
    for (const auto& item : entry.second) {
      char* end = nullptr;
      const long long d = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || d < 1)
        throw InvalidArgument("-shape '" + text + "': dimension '" + item +
                              "' is not a positive integer");
      out[entry.first].push_back(d);
    }
  }
  return out;
}

std::map<std::string, std::vector<float>> parse_values(const std::string& option,
                                                       const std::string& text) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& entry : parse_named_lists(option, text)) {
    for (const auto& item : entry.second) {
      char* end = nullptr;
      const float v = std::strtof(item.c_str(), &end);
      if (item.empty() || *end != '\0')
        throw InvalidArgument(option + " '" + text + "': '" + item + "' is not a number");
      out[entry.first].push_back(v);
    }
  }
  return out;
}

// The values given for input `name` (or, for a model with one input, without a name).
const std::vector<float>* values_for(const std::map<std::string, std::vector<float>>& values,
                                     const std::string& name, size_t input_count) {
  auto it = values.find(name);
  if (it == values.end() && input_count == 1) it = values.find("");
  return it == values.end() ? nullptr : &it->second;
}

// -ip/-op/-mean_values/-scale_values as PrePostProcessor steps, which run in the preprocess and
// postprocess stages.
std::shared_ptr<Model> with_pre_post(const std::shared_ptr<Model>& model, const BenchOptions& o) {
  const auto means = parse_values("-mean_values", o.mean_values);
  const auto scales = parse_values("-scale_values", o.scale_values);
  const size_t input_count = model->inputs().size();
  for (const auto* values : {&means, &scales})
    for (const auto& entry : *values) {
      const bool known = entry.first.empty() ? input_count == 1
                                             : static_cast<bool>(model->find_value(entry.first));
      if (!known)
        throw InvalidArgument(std::string(values == &means ? "-mean_values" : "-scale_values") +
                              ": the model has no input '" + entry.first + "'" +
                              (entry.first.empty() ? " (name the input: several inputs)" : ""));
    }
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

// The shape each request's tensor for `info` gets: -shape, then -b on the first dimension, then
// any dimension still dynamic set to 1. A static dimension cannot be changed.
Shape input_shape(const ValueInfo& info, const std::map<std::string, std::vector<int64_t>>& shapes,
                  size_t input_count, int64_t batch, bool& had_dynamic) {
  const std::vector<int64_t>& model_dims = info.shape.dims();
  std::vector<int64_t> dims = model_dims;
  auto it = shapes.find(info.name);
  if (it == shapes.end() && input_count == 1) it = shapes.find("");
  if (it != shapes.end()) {
    if (it->second.size() != model_dims.size())
      throw InvalidArgument(fmt::format("-shape: input '{}' has rank {} {}, got {} dimensions",
                                        info.name, model_dims.size(), info.shape.to_string(),
                                        it->second.size()));
    for (size_t i = 0; i < dims.size(); ++i) {
      if (model_dims[i] >= 0 && model_dims[i] != it->second[i])
        throw InvalidArgument(fmt::format(
            "-shape: input '{}' is static in dimension {} ({} in {}), cannot run it as {}",
            info.name, i, model_dims[i], info.shape.to_string(), it->second[i]));
      dims[i] = it->second[i];
    }
  }
  if (batch > 0) {
    if (dims.empty())
      throw InvalidArgument("-b " + std::to_string(batch) + ": input '" + info.name +
                            "' is a scalar and has no batch dimension");
    if (model_dims[0] >= 0 && model_dims[0] != batch)
      throw InvalidArgument(fmt::format(
          "-b {}: input '{}' has a static batch of {} ({}); a different batch needs a model whose "
          "first dimension is dynamic",
          batch, info.name, model_dims[0], info.shape.to_string()));
    if (it != shapes.end() && it->second[0] != batch)
      throw InvalidArgument(fmt::format("-b {} contradicts -shape {} for input '{}'", batch,
                                        Shape(it->second).to_string(), info.name));
    dims[0] = batch;
  }
  for (auto& d : dims) {
    if (d < 0) {
      d = 1;
      had_dynamic = true;
    }
  }
  return Shape(dims);
}

// The model with every input given its static run shape (as input_shape resolves it), so the
// compiled model has static shapes: upload and download then convert to and from the layouts
// and types the kernels keep, which they can only do for static shapes.
std::shared_ptr<Model> reshaped(const Model& model,
                                const std::map<std::string, std::vector<int64_t>>& shapes,
                                int64_t batch) {
  auto result = model.clone();
  bool had_dynamic = false;
  for (ValueId in : result->inputs()) {
    ValueInfo& info = result->value(in);
    info.shape = input_shape(info, shapes, result->inputs().size(), batch, had_dynamic);
  }
  try {
    result->validate();
  } catch (const Error& e) {
    throw InvalidArgument(std::string("--reshape: the model does not take these shapes: ") +
                          e.what());
  }
  return result;
}

// Inputs for a model read from a file: deterministic values in [0, 1) (or small integers).
Tensor make_input(const ValueInfo& info, const Shape& shape, uint32_t seed) {
  const bool integral = info.type != ElementType::f32 && info.type != ElementType::f16 &&
                        info.type != ElementType::bf16 && info.type != ElementType::f64;
  std::vector<float> values(static_cast<size_t>(shape.element_count()));
  uint32_t state = seed * 2654435761u + 1;
  for (auto& v : values) {
    state = state * 1664525u + 1013904223u;
    const float u = static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
    v = integral ? std::floor(u * 10.0f) : u;
  }
  Tensor f32 = Tensor::from_vector<float>(shape, values);
  if (info.type == ElementType::f32) return f32;
  if (is_convertible(ElementType::f32, info.type)) return f32.convert(info.type);
  return Tensor(info.type, shape);  // zeros
}

struct LatencySummary {
  double median = 0, average = 0, min = 0, max = 0, p90 = 0, p99 = 0;
};

LatencySummary summarize(std::vector<double> ms) {
  LatencySummary s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  s.median = percentile(ms, 50);
  s.average = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  s.min = ms.front();
  s.max = ms.back();
  s.p90 = percentile(ms, 90);
  s.p99 = percentile(ms, 99);
  return s;
}

// Per-node counters averaged over every recorded run (PERF_COUNT).
struct OpCounter {
  std::string name, type, implementation;
  size_t runs = 0;
  double real_us = 0, cpu_us = 0;  // sums
};

std::vector<OpCounter> op_counters(const detail::CompiledModelImpl& impl,
                                   const std::vector<detail::RequestTrace>& traces) {
  const auto& graph = *impl.graph();
  const auto& nodes = graph.model->nodes();
  std::vector<OpCounter> out(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    out[n].name = nodes[n].name;
    out[n].type = nodes[n].op_type;
    out[n].implementation = n < graph.implementations.size() ? graph.implementations[n] : "?";
  }
  for (const auto& t : traces) {
    for (size_t n = 0; n < t.ops.size() && n < out.size(); ++n) {
      ++out[n].runs;
      out[n].real_us += static_cast<double>(t.ops[n].real_ns) / 1e3;
      out[n].cpu_us += static_cast<double>(t.ops[n].cpu_ns) / 1e3;
    }
  }
  return out;
}

std::string error_text(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown error";
  }
}

// The runtime model as benchmark_app's -exec_graph_path file: one entry per executed node.
json exec_graph_json(const Model& model) {
  auto values_json = [&](const std::vector<ValueId>& ids) {
    json arr = json::array();
    for (ValueId id : ids) {
      const ValueInfo& v = model.value(id);
      arr.push_back(
          {{"name", v.name}, {"type", std::string(to_string(v.type))}, {"shape", v.shape.dims()}});
    }
    return arr;
  };
  json nodes = json::array();
  for (const auto& node : model.nodes()) {
    const Attributes& a = node.attributes;
    json original = json::array();
    if (a.has("original_names"))
      for (const auto& n : std::get<std::vector<std::string>>(a.all().at("original_names")))
        original.push_back(n);
    nodes.push_back({{"name", node.name},
                     {"layer_type", a.get_string_or("layer_type", node.op_type)},
                     {"execution_order", a.get_int_or("execution_order", -1)},
                     {"implementation", a.get_string_or("implementation", "")},
                     {"output_layouts", a.get_string_or("output_layouts", "")},
                     {"original_names", original},
                     {"inputs", values_json(node.inputs)},
                     {"outputs", values_json(node.outputs)}});
  }
  return {{"model", model.name()}, {"nodes", nodes}};
}

// A one-line progress bar redrawn in place on stderr; only used when stderr is a terminal.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  // fraction in [0, 1]; redraws at most every 100 ms.
  void update(double fraction) {
    if (!enabled_) return;
    fraction = std::min(1.0, std::max(0.0, fraction));
    const int percent = static_cast<int>(fraction * 100);
    const int64_t t = now_ns();
    if (percent == last_percent_ || (t - last_ns_ < 100'000'000 && percent < 100)) return;
    last_ns_ = t;
    last_percent_ = percent;
    const int width = 40;
    const int filled = static_cast<int>(fraction * width);
    std::cerr << "\r[" << std::string(static_cast<size_t>(filled), '#')
              << std::string(static_cast<size_t>(width - filled), ' ') << "] " << percent << "%"
              << std::flush;
  }
  void finish() {
    if (!enabled_) return;
    update(1.0);
    std::cerr << "\n" << std::flush;
  }

 private:
  bool enabled_;
  int64_t last_ns_ = 0;
  int last_percent_ = -1;
};

void print_row(const std::string& key, const std::string& value) {
  fmt::print("{:<26}{}\n", key, value);
}

int bench(const BenchOptions& o) {
  const bool time_limited = o.time_s > 0 || o.niter == 0;
  const double time_limit_s = o.time_s > 0 ? o.time_s : (o.niter == 0 ? 5.0 : 0.0);

  Core core;
  AnyMap config;
  config[props::performance_mode] = upper(o.hint);
  if (o.nstreams > 0) config[props::num_streams] = o.nstreams;
  if (o.nthreads > 0) config[props::inference_num_threads] = o.nthreads;
  if (o.perf_counts) config[props::enable_profiling] = true;
  if (!o.infer_precision.empty()) config[props::inference_precision] = o.infer_precision;
  if (o.auto_batch > 0) config[props::auto_batch_max_size] = o.auto_batch;
  if (!o.cache_dir.empty()) config[props::cache_dir] = o.cache_dir;

  const bool pre_post = !o.input_precision.empty() || !o.output_precision.empty() ||
                        !o.mean_values.empty() || !o.scale_values.empty();
  const auto compile_start = Clock::now();
  // A model file is read and compiled, or imported when it is a compiled blob (troupe compile);
  // pre/post-processing needs the model itself.
  std::shared_ptr<Model> model;
  if (o.reshape && is_blob(o.model_path))
    throw InvalidArgument("--reshape: '" + o.model_path +
                          "' is a compiled blob, whose shapes are fixed; give a model file");
  if (o.model_path.empty())
    model = make_default_model();
  else if (pre_post || o.reshape)
    model = core.read_model(o.model_path);
  if (o.reshape) model = reshaped(*model, parse_shapes(o.shape), o.batch);
  if (pre_post) model = with_pre_post(model, o);
  CompiledModel compiled = model ? core.compile_model(model, o.device, config)
                                 : load_compiled_model(core, o.model_path, o.device, config);
  const double compile_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - compile_start).count();

  const int streams = static_cast<int>(compiled.get_property(props::num_streams).as_int());
  const int threads =
      static_cast<int>(compiled.get_property(props::inference_num_threads).as_int());
  const int optimal =
      static_cast<int>(compiled.get_property(props::optimal_number_of_infer_requests).as_int());
  const int max_in_flight =
      static_cast<int>(compiled.get_property(props::max_requests_in_flight).as_int());
  const std::string hint = compiled.get_property(props::performance_mode).as_string();
  const std::string model_name = compiled.get_property(props::model_name).as_string();
  const int nireq = o.nireq > 0 ? o.nireq : optimal;
  std::string device_name;
  try {
    device_name = core.get_property(o.device, props::device_full_name).as_string();
  } catch (const Error&) {
  }

  // Requests and their inputs.
  bool had_dynamic = false;
  const auto shape_spec = parse_shapes(o.shape);
  for (const auto& entry : shape_spec) {
    bool known = entry.first.empty() && compiled.inputs().size() == 1;
    for (const auto& in : compiled.inputs()) known = known || in.name == entry.first;
    if (!known)
      throw InvalidArgument("-shape: the model has no input '" + entry.first + "'" +
                            (entry.first.empty() ? " (name the input: several inputs)" : ""));
  }
  std::vector<Shape> shapes;
  for (const auto& in : compiled.inputs())
    shapes.push_back(input_shape(in, shape_spec, compiled.inputs().size(), o.batch, had_dynamic));
  // benchmark_app counts every batch element: the first dimension of the first input.
  const int64_t batch = !shapes.empty() && shapes[0].rank() > 0 ? shapes[0].dims()[0] : int64_t{1};
  std::vector<InferRequest> requests;
  for (int i = 0; i < nireq; ++i) {
    InferRequest r = compiled.create_infer_request();
    for (size_t k = 0; k < compiled.inputs().size(); ++k) {
      const auto& in = compiled.inputs()[k];
      if (o.model_path.empty() && in.type == ElementType::f32)
        r.set_tensor(in.name,
                     make_default_input(1, default_model_seed + 1 + static_cast<uint32_t>(i)));
      else
        r.set_tensor(in.name, make_input(in, shapes[k], static_cast<uint32_t>(i)));
    }
    requests.push_back(std::move(r));
  }

  fmt::print("[ config ]\n");
  print_row("model", o.model_path.empty() ? model_name + " (embedded default model)"
                                          : model_name + " (" + o.model_path + ")");
  for (const auto& in : compiled.inputs()) print_row("  input", describe(in));
  for (const auto& out : compiled.outputs()) print_row("  output", describe(out));
  for (size_t k = 0; k < shapes.size(); ++k)
    if (shapes[k] != compiled.inputs()[k].shape)
      print_row("  run as", compiled.inputs()[k].name + " " + shapes[k].to_string());
  if (had_dynamic)
    print_row("  note", "dynamic input dimensions not given by -b/-shape were set to 1");
  print_row("batch", std::to_string(batch));
  print_row("device", device_name.empty() ? o.device : o.device + " (" + device_name + ")");
  print_row("performance hint", hint);
  print_row("streams", std::to_string(streams));
  print_row("threads", fmt::format("{} ({} per stream)", threads, std::max(1, threads / streams)));
  const bool execute_on_scheduler = compiled.impl()->config().execute_on_scheduler;
  print_row("execute runs on", execute_on_scheduler
                                   ? "the scheduler's workers, with the other stages (small model)"
                                   : "a thread per stream");
  print_row("infer requests (nireq)",
            fmt::format("{}{}", nireq, o.nireq > 0 ? "" : " (OPTIMAL_NUMBER_OF_INFER_REQUESTS)"));
  print_row("max requests in flight", std::to_string(max_in_flight) + " (pipeline credits)");
  const int64_t auto_batch = compiled.get_property(props::auto_batch_max_size).as_int();
  print_row("automatic batching",
            auto_batch > 1 ? fmt::format("up to {} waiting requests per run", auto_batch)
            : o.auto_batch > 1
                ? fmt::format("off (asked for {}; the model has no dynamic batch dimension)",
                              o.auto_batch)
                : std::string("off"));
  std::string limit;
  if (time_limited) limit = fmt::format("{:g} s", time_limit_s);
  if (o.niter > 0) limit += (limit.empty() ? "" : " or ") + fmt::format("{} iterations", o.niter);
  print_row("limit", limit + (time_limited && o.niter > 0 ? ", whichever comes first" : ""));
  print_row("per-op counters", o.perf_counts ? "on (PERF_COUNT), order: " + o.pc_sort : "off");
  const std::string precision = compiled.get_property(props::inference_precision).as_string();
  print_row("inference precision", precision);
  std::string cache_dir;
  try {
    cache_dir = compiled.get_property(props::cache_dir).as_string();
  } catch (const Error&) {
  }
  if (!cache_dir.empty()) print_row("cache dir", cache_dir);
  print_row("compile time", fmt::format("{:.2f} ms", compile_ms));

  // First inference, reported on its own: it pays one-time costs (buffers, kernel set-up).
  const auto first_start = Clock::now();
  requests[0].infer();
  const double first_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - first_start).count();
  fmt::print("\n[ first inference ]\n");
  print_row("first inference", fmt::format("{:.3f} ms", first_ms));
  std::fflush(stdout);

  auto& stats = compiled.impl()->context().stats;
  stats.reset();
  compiled.impl()->context().batch_fallbacks = 0;

  // Measured phase: every request loops start_async -> callback -> restart, restarted from its own
  // callback (on the completion actor's thread), as benchmark_app does: a hand-over to this thread
  // would add a thread wake-up to every request. Callbacks of one compiled model run one at a
  // time, so what they alone touch (latencies, errors) needs no lock.
  std::vector<int64_t> started_ns(requests.size(), 0);
  std::vector<double> latencies_ms;
  latencies_ms.reserve(o.niter > 0 ? static_cast<size_t>(o.niter) : 1u << 16);
  const int64_t begin_ns = now_ns();
  const int64_t deadline_ns =
      time_limited ? begin_ns + static_cast<int64_t>(time_limit_s * 1e9) : INT64_MAX;
  std::atomic<int64_t> started{0};
  std::exception_ptr first_error;  // callbacks only
  size_t failed = 0;               // callbacks only
  std::mutex loop_mutex;
  std::condition_variable loop_done;
  int64_t in_flight = 0;  // under loop_mutex

  // Claims one more run within -niter and the time limit.
  auto claim_run = [&] {
    if (now_ns() >= deadline_ns) return false;
    if (o.niter <= 0) {
      started.fetch_add(1);
      return true;
    }
    int64_t n = started.load();
    while (n < o.niter)
      if (started.compare_exchange_weak(n, n + 1)) return true;
    return false;
  };
  auto finish_one = [&] {
    std::lock_guard<std::mutex> lock(loop_mutex);
    if (--in_flight == 0) loop_done.notify_all();
  };
  auto start = [&](size_t i) {
    started_ns[i] = now_ns();
    requests[i].start_async();
  };
  for (size_t i = 0; i < requests.size(); ++i)
    requests[i].set_callback([&, i](std::exception_ptr e) {
      const int64_t end_ns = now_ns();
      if (e) {
        ++failed;
        if (!first_error) first_error = e;
      } else {
        latencies_ms.push_back(static_cast<double>(end_ns - started_ns[i]) / 1e6);
      }
      if (!first_error && claim_run()) {
        try {
          start(i);
          return;
        } catch (...) {
          ++failed;
          if (!first_error) first_error = std::current_exception();
        }
      }
      finish_one();
    });

  ProgressBar progress(::isatty(STDERR_FILENO) != 0);
  auto progress_fraction = [&] {
    double f = 0;
    if (o.niter > 0) f = static_cast<double>(started.load()) / static_cast<double>(o.niter);
    if (time_limited)
      f = std::max(f, static_cast<double>(now_ns() - begin_ns) / (time_limit_s * 1e9));
    return f;
  };

  for (size_t i = 0; i < requests.size() && claim_run(); ++i) {
    {
      std::lock_guard<std::mutex> lock(loop_mutex);
      ++in_flight;
    }
    start(i);
  }
  {
    std::unique_lock<std::mutex> lock(loop_mutex);
    while (in_flight > 0) {
      loop_done.wait_for(lock, std::chrono::milliseconds(100));
      lock.unlock();
      progress.update(progress_fraction());
      lock.lock();
    }
  }
  for (auto& r : requests) {
    try {
      r.wait();
    } catch (...) {
    }
  }

  // Until every request has come back, so a time-limited run never reports less than its limit.
  const int64_t end_ns = now_ns();
  progress.finish();
  const double duration_s = static_cast<double>(end_ns - begin_ns) / 1e9;
  const size_t count = latencies_ms.size();
  const double fps =
      duration_s > 0 ? static_cast<double>(count) * static_cast<double>(batch) / duration_s : 0;
  const LatencySummary lat = summarize(latencies_ms);
  const detail::PipelineSummary summary = stats.summary();

  fmt::print("\n[ results ]\n");
  print_row("count", fmt::format("{} requests in {:.3f} s ({} failed)", count, duration_s, failed));
  print_row("throughput", fmt::format("{:.2f} FPS", fps));
  print_row("latency median", fmt::format("{:.3f} ms", lat.median));
  print_row("latency average", fmt::format("{:.3f} ms", lat.average));
  print_row("latency min", fmt::format("{:.3f} ms", lat.min));
  print_row("latency max", fmt::format("{:.3f} ms", lat.max));
  print_row("latency p90", fmt::format("{:.3f} ms", lat.p90));
  print_row("latency p99", fmt::format("{:.3f} ms", lat.p99));

  fmt::print(
      "\n[ pipeline stages ] (per request; busy % = stage busy time / (wall time x workers))\n");
  fmt::print("{}", detail::format_summary(summary));
  const int64_t batch_fallbacks = compiled.impl()->context().batch_fallbacks.load();
  if (auto_batch > 1)
    fmt::print("automatic batching: {} merged runs failed and ran their requests alone\n",
               batch_fallbacks);
  print_row("mean requests in flight", fmt::format("{:.2f}", summary.mean_in_flight));
  print_row("stage overlap",
            fmt::format("{:.2f} (sum of stage busy time / wall time)", summary.stage_overlap));

  std::vector<OpCounter> ops;
  if (o.perf_counts) {
    ops = op_counters(*compiled.impl(), stats.traces());
    auto mean_real = [](const OpCounter& op) {
      return op.runs ? op.real_us / static_cast<double>(op.runs) : 0.0;
    };
    if (o.pc_sort == "sort" || o.pc_sort == "simple_sort")
      std::stable_sort(ops.begin(), ops.end(), [&](const OpCounter& a, const OpCounter& b) {
        return mean_real(a) > mean_real(b);
      });
    if (o.pc_sort == "simple_sort")
      ops.erase(std::remove_if(ops.begin(), ops.end(),
                               [&](const OpCounter& op) { return !(mean_real(op) > 0); }),
                ops.end());
    double total_real = 0;
    for (const auto& op : ops)
      if (op.runs) total_real += op.real_us / static_cast<double>(op.runs);
    fmt::print("\n[ per-op counters ] (averaged over runs; {})\n", o.pc_sort);
    fmt::print("{:<24} {:<20} {:<28} {:>8} {:>11} {:>11} {:>7}\n", "node", "type", "implementation",
               "runs", "real us", "cpu us", "%");
    for (const auto& op : ops) {
      const double runs = static_cast<double>(std::max<size_t>(op.runs, 1));
      const double real = op.real_us / runs;
      fmt::print("{:<24} {:<20} {:<28} {:>8} {:>11.2f} {:>11.2f} {:>7.1f}\n", op.name, op.type,
                 op.implementation, op.runs, real, op.cpu_us / runs,
                 total_real > 0 ? 100.0 * real / total_real : 0.0);
    }
  }

  if (!o.exec_graph_path.empty()) {
    std::ofstream out(o.exec_graph_path);
    out << exec_graph_json(*compiled.runtime_model()).dump(2) << "\n";
    if (!out) {
      std::cerr << "troupe bench: error: cannot write execution graph file '" << o.exec_graph_path
                << "'\n";
      return 1;
    }
    fmt::print("\nexecution graph written to {}\n", o.exec_graph_path);
  }

  if (!o.trace_path.empty()) {
    std::vector<std::string> op_names;
    for (const auto& node : compiled.impl()->graph()->model->nodes()) op_names.push_back(node.name);
    std::ofstream out(o.trace_path);
    out << detail::chrome_trace_json(stats.traces(), compiled.impl()->config().num_streams,
                                     op_names);
    if (!out) {
      std::cerr << "troupe bench: error: cannot write trace file '" << o.trace_path << "'\n";
      return 1;
    }
    fmt::print("\ntrace written to {} (open it in the Perfetto UI or chrome://tracing)\n",
               o.trace_path);
  }
  if (!o.timeline_path.empty()) {
    std::ofstream out(o.timeline_path);
    out << detail::timeline_svg(stats.traces(), compiled.impl()->config().num_streams);
    if (!out) {
      std::cerr << "troupe bench: error: cannot write timeline file '" << o.timeline_path << "'\n";
      return 1;
    }
    fmt::print("timeline written to {}\n", o.timeline_path);
  }

  if (!o.report.empty()) {
    json stages = json::array();
    for (const auto& st : summary.stages)
      stages.push_back({{"name", st.name},
                        {"count", st.count},
                        {"mean_us", st.mean_us},
                        {"p50_us", st.p50_us},
                        {"p90_us", st.p90_us},
                        {"p99_us", st.p99_us},
                        {"max_us", st.max_us},
                        {"queue_wait_mean_us", st.queue_wait_mean_us},
                        {"busy_us", st.busy_us},
                        {"occupancy", st.occupancy},
                        {"workers", st.workers}});
    json inputs = json::array(), outputs = json::array();
    for (const auto& in : compiled.inputs()) inputs.push_back(value_json(in));
    for (const auto& out : compiled.outputs()) outputs.push_back(value_json(out));
    json report = {{"config",
                    {{"model", model_name},
                     {"model_path", o.model_path.empty() ? json(nullptr) : json(o.model_path)},
                     {"embedded_model", o.model_path.empty()},
                     {"inputs", inputs},
                     {"outputs", outputs},
                     {"device", o.device},
                     {"device_full_name", device_name},
                     {"performance_hint", hint},
                     {"num_streams", streams},
                     {"inference_num_threads", threads},
                     {"nireq", nireq},
                     {"optimal_number_of_infer_requests", optimal},
                     {"max_requests_in_flight", max_in_flight},
                     {"time_limit_s", time_limited ? json(time_limit_s) : json(nullptr)},
                     {"iteration_limit", o.niter > 0 ? json(o.niter) : json(nullptr)},
                     {"perf_count", o.perf_counts},
                     {"pc_sort", o.pc_sort},
                     {"batch", batch},
                     {"inference_precision", precision},
                     {"auto_batch_max_size", auto_batch},
                     {"execute_on_scheduler", execute_on_scheduler},
                     {"cache_dir", cache_dir.empty() ? json(nullptr) : json(cache_dir)},
                     {"compile_time_ms", compile_ms}}},
                   {"first_inference_ms", first_ms},
                   {"results",
                    {{"count", count},
                     {"failed", failed},
                     {"duration_s", duration_s},
                     {"throughput_fps", fps},
                     {"latency_ms",
                      {{"median", lat.median},
                       {"average", lat.average},
                       {"min", lat.min},
                       {"max", lat.max},
                       {"p90", lat.p90},
                       {"p99", lat.p99}}}}},
                   {"pipeline",
                    {{"requests", summary.requests},
                     {"failed", summary.failed},
                     {"wall_ms", summary.wall_us / 1e3},
                     {"mean_requests_in_flight", summary.mean_in_flight},
                     {"stage_overlap", summary.stage_overlap},
                     {"merged_run_fallbacks", batch_fallbacks},
                     {"execute_mean_batch",
                      summary.stages[static_cast<size_t>(detail::Stage::execute)].mean_batch},
                     {"bottleneck", summary.bottleneck},
                     {"stages", stages}}}};
    if (o.perf_counts) {
      json per_op = json::array();
      for (const auto& op : ops) {
        const double runs = static_cast<double>(std::max<size_t>(op.runs, 1));
        per_op.push_back({{"name", op.name},
                          {"type", op.type},
                          {"implementation", op.implementation},
                          {"runs", op.runs},
                          {"mean_real_us", op.real_us / runs},
                          {"mean_cpu_us", op.cpu_us / runs}});
      }
      report["per_op"] = per_op;
    }
    if (first_error) report["error"] = error_text(first_error);
    std::ofstream out(o.report[1]);
    out << report.dump(2) << "\n";
    if (!out) {
      std::cerr << "troupe bench: error: cannot write report file '" << o.report[1] << "'\n";
      return 1;
    }
    fmt::print("\nreport written to {}\n", o.report[1]);
  }

  if (first_error) {
    std::cerr << "troupe bench: error: " << failed
              << " request(s) failed; first error: " << error_text(first_error) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

CLI::App* add_bench_command(CLI::App& app, BenchOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Run a model with several requests in flight and report throughput, latency and what each "
      "pipeline stage did (count, time, queue wait, occupancy, overlap, bottleneck).");
  cmd->add_option("-m,--model", o.model_path,
                  "Model file to run (see `troupe info` for the formats), or a compiled .blob "
                  "from `troupe compile`. Default: the embedded CNN, image f32[1,3,32,32] -> "
                  "probabilities f32[1,10]")
      ->option_text("PATH");
  cmd->add_option("-d,--device", o.device, "Device to compile for (default CPU)")
      ->option_text("NAME");
  cmd->add_option("--hint", o.hint,
                  "Performance hint: 'throughput' (a stream per core, several requests in "
                  "flight; the default) or 'latency' (one stream, one request)")
      ->option_text("latency|throughput")
      ->check(CLI::IsMember({"latency", "throughput"}, CLI::ignore_case));
  cmd->add_option("--nireq", o.nireq,
                  "Number of infer requests kept in flight. Default: the compiled model's "
                  "OPTIMAL_NUMBER_OF_INFER_REQUESTS")
      ->option_text("N")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--nstreams", o.nstreams,
                  "Number of execute streams (NUM_STREAMS). Default: chosen by the hint")
      ->option_text("N")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--nthreads", o.nthreads,
                  "Total compute threads, shared by the streams (INFERENCE_NUM_THREADS). "
                  "Default: every core")
      ->option_text("N")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("-t,--time", o.time_s,
                  "Run for SECONDS (default 5 when --niter is not given; with both, whichever "
                  "limit comes first)")
      ->option_text("SECONDS")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            char* end = nullptr;
            const double seconds = std::strtod(value.c_str(), &end);
            if (end == value.c_str() || *end != '\0' || !(seconds > 0))
              return "expected a positive number of seconds, got '" + value + "'";
            return {};
          },
          "", "positive seconds"));
  cmd->add_option("--niter", o.niter,
                  "Run N requests after the first inference (with -t, whichever limit comes first)")
      ->option_text("N")
      ->check(CLI::Range(int64_t{1}, INT64_MAX));
  cmd->add_flag("--pc,--perf-counts", o.perf_counts,
                "Enable PERF_COUNT and print per-op counters averaged over all runs");
  cmd->add_option("--pcsort", o.pc_sort,
                  "Order of the per-op counters (turns on --pc): 'sort' by real time, descending; "
                  "'no_sort' in execution order (the default); 'simple_sort' sorted, ops with zero "
                  "time hidden")
      ->option_text("sort|no_sort|simple_sort")
      ->check(CLI::IsMember({"sort", "no_sort", "simple_sort"}));
  cmd->add_option("--exec_graph_path", o.exec_graph_path,
                  "Write the runtime (execution) graph to FILE as JSON: each node's name, layer "
                  "type, execution order, implementation, original names and its input/output "
                  "values with shapes")
      ->option_text("FILE");
  cmd->add_option("--infer_precision", o.infer_precision,
                  "Inference precision (INFERENCE_PRECISION_HINT): f32, or bf16 where the CPU "
                  "supports it (falls back to f32 otherwise). Default: the device's")
      ->option_text("f32|bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
  cmd->add_option("--auto_batch", o.auto_batch,
                  "Automatic batching (AUTO_BATCH_MAX_SIZE): up to N requests waiting at the same "
                  "stream run as one batch along the leading dimension. Only for models whose "
                  "inputs and outputs all have a dynamic leading dimension")
      ->option_text("N")
      ->check(CLI::Range(1, 256));
  cmd->add_flag("--reshape", o.reshape,
                "Compile the model with its inputs made static in the shapes -shape/-b give "
                "(remaining dynamic dimensions 1), as benchmark_app's -shape does, instead of "
                "compiling it dynamic and binding those shapes per request");
  cmd->add_option("--cache_dir", o.cache_dir,
                  "Directory for the compiled-model cache, passed to the device as its CACHE_DIR "
                  "property")
      ->option_text("DIR");
  cmd->add_option("-b,--batch", o.batch,
                  "Batch: the first dimension of every input, for models whose first dimension "
                  "is dynamic. Throughput counts each batch element")
      ->option_text("N")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--shape", o.shape,
                  "Shapes to run dynamic inputs with, e.g. \"image[1,3,224,224]\" or "
                  "\"a[1,8],b[1,4]\" ([...] alone names the only input)")
      ->option_text("SHAPES");
  cmd->add_option("--ip", o.input_precision,
                  "Element type of the input tensors the caller sets (e.g. u8); converted to the "
                  "model's type in the preprocess stage")
      ->option_text("TYPE");
  cmd->add_option("--op", o.output_precision,
                  "Element type the outputs are returned in (e.g. f16); converted in the "
                  "postprocess stage")
      ->option_text("TYPE");
  cmd->add_option("--mean_values", o.mean_values,
                  "Per-channel mean subtracted in the preprocess stage, e.g. "
                  "\"image[123.7,116.3,103.5]\" ([...] alone names the only input)")
      ->option_text("VALUES");
  cmd->add_option("--scale_values", o.scale_values,
                  "Per-channel scale the input is divided by after the mean, e.g. "
                  "\"image[58.4,57.1,57.4]\"")
      ->option_text("VALUES");
  cmd->add_option(
      "--trace", o.trace_path,
      "Write a Chrome Trace Event / Perfetto JSON of the run to FILE: a track per stage "
      "and execute stream, each request's stages, flow arrows, per-op spans with --pc");
  cmd->add_option("--timeline", o.timeline_path,
                  "Write an SVG picture of stage occupancy over time to FILE");
  cmd->add_option("--report", o.report,
                  "Write every printed figure to FILE as JSON (the only report type is 'json')")
      ->option_text("json FILE")
      ->expected(2);
  cmd->parse_complete_callback([&o, cmd] {
    // As in benchmark_app, asking for an order of the counters asks for the counters.
    if (cmd->count("--pcsort") > 0) o.perf_counts = true;
    if (!o.report.empty() && o.report[0] != "json")
      throw CLI::ValidationError("--report", "report type '" + o.report[0] +
                                                 "' is not supported (use: --report json FILE)");
  });
  return cmd;
}

int run_bench(const BenchOptions& options) {
  try {
    return bench(options);
  } catch (const std::exception& e) {
    std::cerr << "troupe bench: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace troupe::apps
