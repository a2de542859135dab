#include "apps/run_command.hpp"

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "apps/compile_command.hpp"
#include "serialization/npy_format.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/properties.hpp"

namespace troupe::apps {

namespace {

struct GivenInput {
  std::string file;
  Tensor tensor;
};

std::string describe(const ValueInfo& info) {
  return fmt::format("{} {} {}", info.name, to_string(info.type), info.shape.to_string());
}

std::string list_inputs(const CompiledModel& compiled) {
  std::string out;
  for (const auto& in : compiled.inputs()) out += (out.empty() ? "" : ", ") + describe(in);
  return out.empty() ? "none" : out;
}

// "NAME=FILE" -> (NAME, FILE); a bare FILE gets the name "" (the model's only input).
std::pair<std::string, std::string> split_input_spec(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos) return {"", spec};
  if (eq == 0) throw InvalidArgument("--input '" + spec + "': no input name before '='");
  if (eq + 1 == spec.size()) throw InvalidArgument("--input '" + spec + "': no file after '='");
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

// Matches the --input files with the model's inputs; every input must be given exactly once, with
// the model's element type and a shape the model accepts (dynamic dimensions take the file's).
std::map<std::string, GivenInput> match_inputs(
    const CompiledModel& compiled, const std::vector<std::pair<std::string, GivenInput>>& given) {
  const auto& inputs = compiled.inputs();
  std::map<std::string, GivenInput> by_name;
  for (const auto& [name, input] : given) {
    std::string key = name;
    if (key.empty()) {
      if (inputs.size() != 1)
        throw InvalidArgument("--input '" + input.file + "' has no NAME= and the model has " +
                              std::to_string(inputs.size()) + " inputs (" + list_inputs(compiled) +
                              "); use --input NAME=FILE.npy");
      key = inputs[0].name;
    }
    bool known = false;
    for (const auto& in : inputs) known = known || in.name == key;
    if (!known)
      throw InvalidArgument("the model has no input '" + key +
                            "'; its inputs: " + list_inputs(compiled));
    if (by_name.count(key))
      throw InvalidArgument("input '" + key + "' is given twice ('" + by_name[key].file +
                            "' and '" + input.file + "')");
    by_name[key] = input;
  }
  for (const auto& in : inputs) {
    auto it = by_name.find(in.name);
    if (it == by_name.end())
      throw InvalidArgument("input '" + in.name + "' (" + to_string(in.type).data() + " " +
                            in.shape.to_string() + ") is not given; pass --input " + in.name +
                            "=FILE.npy (the model's inputs: " + list_inputs(compiled) + ")");
    check_input_file(in, it->second.tensor, it->second.file);
  }
  return by_name;
}

int run_model(const RunOptions& o) {
  // The files first: a bad path or file fails before a large model is compiled.
  std::vector<std::pair<std::string, GivenInput>> given;
  for (const auto& spec : o.inputs) {
    auto [name, file] = split_input_spec(spec);
    given.push_back({name, GivenInput{file, serialization::read_npy(file)}});
  }

  Core core;
  AnyMap config;
  config[props::performance_mode] = "LATENCY";  // one request: one stream with every thread
  if (!o.infer_precision.empty()) config[props::inference_precision] = o.infer_precision;
  CompiledModel compiled = load_compiled_model(core, o.model_path, o.device, config);
  const auto inputs = match_inputs(compiled, given);

  // The output names must map to distinct files, and the directory must exist, before running.
  std::map<std::string, std::string> files;
  std::set<std::string> taken;
  for (const auto& out : compiled.outputs()) {
    const std::string file = output_file_name(out.name);
    if (!taken.insert(file).second)
      throw InvalidArgument("two outputs would both be written to '" + file + "' (one is '" +
                            out.name + "')");
    files[out.name] = (std::filesystem::path(o.output_dir) / file).string();
  }
  std::error_code ec;
  std::filesystem::create_directories(o.output_dir, ec);
  if (ec || !std::filesystem::is_directory(o.output_dir))
    throw InvalidArgument("cannot create the output directory '" + o.output_dir +
                          "': " + (ec ? ec.message() : "not a directory"));

  InferRequest request = compiled.create_infer_request();
  for (const auto& in : compiled.inputs()) {
    const GivenInput& input = inputs.at(in.name);
    request.set_tensor(in.name, input.tensor);
    fmt::print("input  {}: {} {} <- {}\n", in.name, to_string(input.tensor.element_type()),
               input.tensor.shape().to_string(), input.file);
  }
  const auto start = std::chrono::steady_clock::now();
  request.infer();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  for (const auto& out : compiled.outputs()) {
    Tensor t = request.get_tensor(out.name);
    // NumPy has no bf16; widening to f32 is exact.
    if (t.element_type() == ElementType::bf16) t = t.convert(ElementType::f32);
    serialization::write_npy(t, files.at(out.name));
    fmt::print("output {}: {} {} -> {}\n", out.name, to_string(t.element_type()),
               t.shape().to_string(), files.at(out.name));
  }
  fmt::print("inference {:.2f} ms in {}\n", ms,
             compiled.get_property(props::inference_precision).as_string());
  return 0;
}

}  // namespace

void check_input_file(const ValueInfo& input, const Tensor& tensor, const std::string& file) {
  if (tensor.element_type() != input.type)
    throw TensorMismatch(
        fmt::format("input '{}' is {} in the model but '{}' holds {} (convert it, e.g. numpy's "
                    "a.astype(...), before saving)",
                    input.name, to_string(input.type), file, to_string(tensor.element_type())));
  if (!input.shape.accepts(tensor.shape()))
    throw TensorMismatch(fmt::format("input '{}' has shape {} in the model but '{}' holds {}",
                                     input.name, input.shape.to_string(), file,
                                     tensor.shape().to_string()));
}

std::string output_file_name(const std::string& output_name) {
  std::string name = output_name;
  for (char& c : name)
    if (c == '/' || c == '\0') c = '_';
  if (name.empty() || name == "." || name == "..") name = "_" + name;
  return name + ".npy";
}

CLI::App* add_run_command(CLI::App& app, RunOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run one inference on inputs read from .npy files and write every output to "
      "DIR/<output name>.npy.");
  cmd->add_option("-m,--model", o.model_path,
                  "Model to run: .onnx, .troupe or a blob written by `troupe compile`")
      ->option_text("PATH")
      ->required();
  cmd->add_option("-i,--input", o.inputs,
                  "An input and the .npy file holding it (repeat for each input; the tensor's "
                  "shape is the file's, so a dynamic batch takes the file's batch). A model with "
                  "one input also takes a bare FILE.npy")
      ->option_text("NAME=FILE.npy")
      ->take_all();
  cmd->add_option("-o,--output-dir", o.output_dir,
                  "Directory to write <output name>.npy into (created if missing)")
      ->option_text("DIR")
      ->required();
  cmd->add_option("-d,--device", o.device, "Device to run on (default CPU)")->option_text("NAME");
  cmd->add_option("--infer_precision", o.infer_precision,
                  "Inference precision (INFERENCE_PRECISION_HINT): f32, or bf16 where the CPU "
                  "supports it. Default: the device's")
      ->option_text("f32|bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
  cmd->footer(
      "Example: troupe run -m resnet50.onnx --input input=x.npy --output-dir out\n"
      "Prints one line per input and per output (name, element type, shape, file).");
  return cmd;
}

int run_run(const RunOptions& options) {
  try {
    return run_model(options);
  } catch (const std::exception& e) {
    std::cerr << "troupe run: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace troupe::apps
