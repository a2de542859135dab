#include "apps/quantize_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "apps/bench_progress.hpp"
#include "apps/quantize_calibration.hpp"
#include "apps/quantize_qdq.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/infer_request.hpp"
#include "troupe/model.hpp"
#include "troupe/properties.hpp"

namespace troupe::apps {

namespace {

namespace fs = std::filesystem;

// A model file written for one compile and removed after it.
class TemporaryModel {
 public:
  TemporaryModel(const onnx::ModelProto& model, const std::string& tag)
      : path_(fs::temp_directory_path() /
              fmt::format("troupe-quantize-{}-{}.onnx", ::getpid(), tag)) {
    save_onnx_model(model, path_.string());
  }
  ~TemporaryModel() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  TemporaryModel(const TemporaryModel&) = delete;
  TemporaryModel& operator=(const TemporaryModel&) = delete;
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

CompiledModel compile_latency(Core& core, const std::string& path) {
  return core.compile_model(path, "CPU", {{props::performance_mode, std::string("LATENCY")}});
}

// How far the quantized model's outputs are from the fp32 model's, over the held-out samples.
struct OutputError {
  double max_abs = 0.0;
  double sum_abs = 0.0;
  double sum_sq_diff = 0.0;
  double sum_sq_ref = 0.0;
  int64_t count = 0;
  int64_t rows = 0;  // argmax rows compared (rank >= 2, last dimension >= 2)
  int64_t agree = 0;

  void add(const Tensor& fp32, const Tensor& quantized) {
    if (fp32.element_type() != ElementType::f32 || quantized.element_type() != ElementType::f32 ||
        fp32.size() != quantized.size())
      return;
    const Tensor f = fp32.contiguous(), q = quantized.contiguous();
    const float* a = f.data<float>();
    const float* b = q.data<float>();
    for (int64_t i = 0; i < f.size(); ++i) {
      const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
      max_abs = std::max(max_abs, d);
      sum_abs += d;
      sum_sq_diff += d * d;
      sum_sq_ref += static_cast<double>(a[i]) * a[i];
    }
    count += f.size();
    const auto& dims = f.shape();
    if (dims.rank() >= 2 && dims[dims.rank() - 1] >= 2) {
      const int64_t classes = dims[dims.rank() - 1];
      for (int64_t r = 0; r < f.size() / classes; ++r) {
        const float* fa = a + r * classes;
        const float* qb = b + r * classes;
        agree += std::max_element(fa, fa + classes) - fa == std::max_element(qb, qb + classes) - qb;
        ++rows;
      }
    }
  }
  double relative_l2() const {
    return sum_sq_ref > 0 ? std::sqrt(sum_sq_diff / sum_sq_ref) : std::sqrt(sum_sq_diff);
  }
};

std::map<std::string, OutputError> evaluate(CompiledModel& fp32, CompiledModel& quantized,
                                            const std::vector<CalibrationSample>& samples) {
  InferRequest fr = fp32.create_infer_request(), qr = quantized.create_infer_request();
  std::map<std::string, OutputError> errors;
  for (const auto& s : samples) {
    const auto expected = run_sample(fp32, fr, s);
    const auto got = run_sample(quantized, qr, s);
    for (const auto& [name, tensor] : expected) {
      auto it = got.find(name);
      if (it != got.end()) errors[name].add(tensor, it->second);
    }
  }
  return errors;
}

std::string percent(double x) {
  return fmt::format("{:.2f}%", 100.0 * x);
}

int quantize(const QuantizeOptions& o) {
  const std::string output = !o.output_path.empty()
                                 ? o.output_path
                                 : (fs::path(o.model_path).parent_path() /
                                    (fs::path(o.model_path).stem().string() + ".int8.onnx"))
                                       .string();
  if (fs::path(o.model_path).extension() != ".onnx")
    throw InvalidArgument("'" + o.model_path +
                          "': troupe quantize reads ONNX models (.onnx); it writes the QDQ form "
                          "as ONNX, which both troupe and ONNX Runtime run");

  const onnx::ModelProto model = read_onnx_model(o.model_path);
  QdqSettings settings;
  settings.exclude = o.exclude;
  settings.per_channel = !o.per_tensor;
  settings.reduce_range = o.reduce_range;
  const QdqPlan plan = plan_qdq(model, settings);

  Core core;
  CompiledModel fp32 = compile_latency(core, o.model_path);
  std::vector<CalibrationSample> samples =
      read_calibration_samples(o.calibration_dir, fp32.inputs());
  const size_t held = o.holdout >= 0
                          ? static_cast<size_t>(o.holdout)
                          : (samples.size() >= 5 ? std::min<size_t>(32, samples.size() / 5) : 0);
  if (held >= samples.size())
    throw InvalidArgument(
        fmt::format("--holdout {} leaves none of the {} samples in '{}' to calibrate on", held,
                    samples.size(), o.calibration_dir));
  const std::vector<CalibrationSample> holdout(samples.end() - static_cast<long>(held),
                                               samples.end());
  samples.resize(samples.size() - held);

  fmt::print("model           {} (opset {}, {} nodes)\n", o.model_path, onnx_opset(model),
             model.graph().node_size());
  fmt::print(
      "quantizing      {} Conv/Gemm/MatMul, {} Add/Concat/data movement, {} activations (u8 per "
      "tensor), weights s8 {}{}\n",
      plan.products.size(), plan.propagating.size(), plan.activations.size(),
      settings.per_channel ? "per output channel" : "per tensor",
      settings.reduce_range ? " (7-bit)" : "");
  fmt::print("calibration     {} samples from {}, {}{}\n", samples.size(), o.calibration_dir,
             o.method, o.method == "percentile" ? fmt::format(" {}", o.percentile) : "");
  std::fflush(stdout);

  RangeCollector ranges(o.method == "percentile" ? o.percentile : 100.0);
  {
    // Data movement outputs take their input's grid: nothing to observe there.
    std::vector<std::string> observed;
    for (const auto& name : plan.activations)
      if (!plan.shared_range.count(name)) observed.push_back(name);
    // troupe's own shape inference follows shapes the graph computes, where onnx's stops.
    std::map<std::string, std::vector<int64_t>> shapes;
    const auto troupe_model = core.read_model(o.model_path);
    for (const auto& name : observed)
      if (auto id = troupe_model->find_value(name)) {
        const Shape& shape = troupe_model->value(*id).shape;
        std::vector<int64_t> dims;
        for (int64_t d : shape) dims.push_back(d == Shape::dynamic ? -1 : d);
        shapes[name] = dims;
      }
    TemporaryModel calibration_model(with_extra_outputs(model, observed, shapes), "calibration");
    CompiledModel calibration = compile_latency(core, calibration_model.path());
    InferRequest request = calibration.create_infer_request();
    const int passes = ranges.needs_second_pass() ? 2 : 1;
    ProgressBar progress;
    for (int pass = 0; pass < passes; ++pass)
      for (size_t s = 0; s < samples.size(); ++s) {
        const auto outputs = run_sample(calibration, request, samples[s]);
        for (const auto& name : observed) {
          auto it = outputs.find(name);
          if (it == outputs.end()) continue;
          if (pass == 0)
            ranges.observe(name, it->second);
          else
            ranges.observe_histogram(name, it->second);
        }
        progress.update(static_cast<double>(pass * samples.size() + s + 1) /
                        static_cast<double>(passes * samples.size()));
      }
    progress.finish();
  }
  const auto activation_ranges = ranges.ranges();
  const onnx::ModelProto quantized_model = rewrite_qdq(model, plan, activation_ranges, settings);
  write_onnx_model(quantized_model, output);
  fmt::print("written         {} ({:.1f} MB; the fp32 model {:.1f} MB)\n", output,
             static_cast<double>(fs::file_size(output)) / 1e6,
             static_cast<double>(fs::file_size(o.model_path)) / 1e6);

  CompiledModel quantized = compile_latency(core, output);
  std::map<std::string, int> int8_kernels;
  int float_products = 0;
  for (const auto& node : quantized.runtime_model()->nodes()) {
    if (node.op_type.rfind("QLinear", 0) == 0) ++int8_kernels[node.op_type];
    if (node.op_type == "Conv" || node.op_type == "Gemm" || node.op_type == "MatMul")
      ++float_products;
  }
  std::string kinds;
  int total_int8 = 0;
  for (const auto& [kind, n] : int8_kernels) {
    kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, kind);
    total_int8 += n;
  }
  fmt::print("on this CPU     troupe runs {} int8 kernels ({}), {} float products\n", total_int8,
             kinds.empty() ? "none" : kinds, float_products);

  if (holdout.empty()) {
    fmt::print(
        "held-out        none (fewer than 5 samples; --holdout N keeps N out of "
        "calibration to measure the error)\n");
    return 0;
  }
  const auto errors = evaluate(fp32, quantized, holdout);
  fmt::print("held-out        {} samples: the int8 model against the fp32 model\n", holdout.size());
  fmt::print("  {:<24} {:>12} {:>12} {:>10} {:>16}\n", "output", "max |q-f|", "mean |q-f|",
             "rel. L2", "top-1 agreement");
  for (const auto& [name, e] : errors)
    fmt::print("  {:<24} {:>12.4g} {:>12.4g} {:>10} {:>16}\n", name, e.max_abs,
               e.count ? e.sum_abs / static_cast<double>(e.count) : 0.0, percent(e.relative_l2()),
               e.rows ? fmt::format("{}/{} ({})", e.agree, e.rows,
                                    percent(static_cast<double>(e.agree) / e.rows))
                      : "-");

  if (o.sensitivity) {
    // One product quantized at a time: which layers cost the accuracy (candidates for --exclude).
    const std::vector<CalibrationSample> few(holdout.begin(),
                                             holdout.begin() + std::min<size_t>(8, holdout.size()));
    std::vector<std::pair<double, int>> cost;
    ProgressBar progress;
    for (size_t k = 0; k < plan.products.size(); ++k) {
      const int node = plan.products[k];
      TemporaryModel one(rewrite_qdq(model, plan, activation_ranges, settings, {node}), "layer");
      CompiledModel compiled = compile_latency(core, one.path());
      double worst = 0.0;
      for (const auto& [name, e] : evaluate(fp32, compiled, few))
        worst = std::max(worst, e.relative_l2());
      cost.push_back({worst, node});
      progress.update(static_cast<double>(k + 1) / static_cast<double>(plan.products.size()));
    }
    progress.finish();
    std::sort(cost.rbegin(), cost.rend());
    fmt::print(
        "sensitivity     one layer quantized alone, rel. L2 of the outputs on {} samples "
        "(worst first; --exclude NAME keeps a layer fp32)\n",
        few.size());
    for (size_t i = 0; i < cost.size() && i < 10; ++i) {
      const auto& node = model.graph().node(cost[i].second);
      fmt::print("  {:<40} {:<8} {:>10}\n",
                 node.name().empty() ? fmt::format("(node {})", cost[i].second) : node.name(),
                 node.op_type(), percent(cost[i].first));
    }
  }
  return 0;
}

}  // namespace

CLI::App* add_quantize_command(CLI::App& app, QuantizeOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Post-training static quantization: calibrate an fp32 ONNX model on a folder of inputs and "
      "write its QDQ form (s8 weights per output channel, u8 activations, i32 biases), which "
      "troupe and ONNX Runtime run in int8; then report the error on held-out samples.");
  cmd->add_option("-m,--model", o.model_path, "fp32 ONNX model")->option_text("PATH")->required();
  cmd->add_option("-c,--calibration", o.calibration_dir,
                  "Folder of calibration inputs: one .npy per sample for a one-input model, else "
                  "one subfolder per sample holding NAME.npy per input")
      ->option_text("DIR")
      ->required();
  cmd->add_option("-o,--output", o.output_path,
                  "QDQ model to write. Default: MODEL.int8.onnx beside the model")
      ->option_text("PATH");
  cmd->add_option("--method", o.method,
                  "Activation ranges: minmax (observed min and max) or percentile (clip the "
                  "tails, see --percentile)")
      ->option_text("minmax|percentile")
      ->check(CLI::IsMember({"minmax", "percentile"}));
  cmd->add_option("--percentile", o.percentile,
                  "With --method percentile: the share of values inside the range (default "
                  "99.999)")
      ->option_text("P");
  cmd->add_option("--exclude", o.exclude, "Node names or op types to keep in fp32")
      ->option_text("NAME ...");
  cmd->add_option("--holdout", o.holdout,
                  "Samples (the last ones, sorted by name) kept out of calibration to measure the "
                  "error. Default: a fifth of them, at most 32 (none below 5 samples)")
      ->option_text("N");
  cmd->add_flag("--reduce-range", o.reduce_range,
                "7-bit weights: the int8 kernels are exact on CPUs without VNNI too");
  cmd->add_flag("--per-tensor", o.per_tensor, "One weight scale per layer, not per channel");
  cmd->add_flag("--sensitivity", o.sensitivity,
                "Also quantize each Conv/Gemm/MatMul alone and list the layers that cost the most "
                "accuracy");
  return cmd;
}

int run_quantize(const QuantizeOptions& options) {
  try {
    return quantize(options);
  } catch (const std::exception& e) {
    std::cerr << "troupe quantize: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace troupe::apps
