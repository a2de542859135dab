#include "apps/compile_command.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "serialization/blob/compiled_blob.hpp"
#include "troupe/error.hpp"
#include "troupe/properties.hpp"

namespace troupe::apps {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

int compile(const CompileOptions& o) {
  const std::string output =
      o.output_path.empty()
          ? std::filesystem::path(o.model_path).replace_extension(".blob").string()
          : o.output_path;
  if (is_blob(o.model_path))
    throw InvalidArgument("'" + o.model_path + "' is already a compiled blob");
  AnyMap config;
  if (!o.hint.empty()) config[props::performance_mode] = o.hint;
  if (!o.precision.empty()) config[props::inference_precision] = o.precision;

  Core core;
  auto start = Clock::now();
  auto model = core.read_model(o.model_path);
  const double read_ms = ms_since(start);
  start = Clock::now();
  CompiledModel compiled = core.compile_model(model, o.device, config);
  const double compile_ms = ms_since(start);

  start = Clock::now();
  {
    std::ofstream out(output, std::ios::binary | std::ios::trunc);
    if (!out) throw InvalidArgument("cannot write '" + output + "'");
    compiled.export_model(out);
    out.close();
    if (!out) throw InvalidArgument("error while writing '" + output + "'");
  }
  const double export_ms = ms_since(start);

  std::ifstream in(output, std::ios::binary);
  const serialization::BlobInfo info = serialization::read_blob_info(in);
  fmt::print("model            {} ({}, {} nodes)\n", o.model_path, model->name(),
             model->nodes().size());
  fmt::print("device           {} ({} inference)\n", info.device,
             to_string(info.config.inference_precision));
  fmt::print("read             {:.1f} ms\n", read_ms);
  fmt::print("compile          {:.1f} ms\n", compile_ms);
  fmt::print("export           {:.1f} ms -> {} ({} bytes)\n", export_ms, output,
             std::filesystem::file_size(output));
  fmt::print("needs            {}\n", join(info.required_capabilities));
  fmt::print("troupe version   {}\n", info.troupe_version);
  if (o.verify) {
    std::ifstream blob(output, std::ios::binary);
    start = Clock::now();
    CompiledModel imported = core.import_model(blob, o.device);
    const double import_ms = ms_since(start);
    fmt::print("import           {:.1f} ms (read + compile / import = {:.2f})\n", import_ms,
               (read_ms + compile_ms) / import_ms);
  }
  return 0;
}

}  // namespace

bool is_blob(const std::string& path) {
  return std::filesystem::path(path).extension() == ".blob";
}

CompiledModel load_compiled_model(Core& core, const std::string& path, const std::string& device,
                                  const AnyMap& properties) {
  if (is_blob(path)) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InvalidArgument("cannot open compiled blob '" + path + "'");
    return core.import_model(in, device, properties);
  }
  return core.compile_model(path, device, properties);
}

CLI::App* add_compile_command(CLI::App& app, CompileOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "compile",
      "Compile a model file and write the compiled blob (graph, chosen kernels, configuration, "
      "the troupe version and CPU it needs), which `troupe bench -m FILE.blob` loads without "
      "compiling again.");
  cmd->add_option("-m,--model", o.model_path, "Model file to compile (.onnx, .troupe)")
      ->option_text("PATH")
      ->required();
  cmd->add_option("-o,--output", o.output_path,
                  "Blob to write. Default: the model path with the extension .blob")
      ->option_text("PATH");
  cmd->add_option("-d,--device", o.device, "Device to compile for (default CPU)")
      ->option_text("NAME");
  cmd->add_option("--hint", o.hint, "Performance hint stored in the blob")
      ->option_text("latency|throughput")
      ->check(CLI::IsMember({"latency", "throughput"}, CLI::ignore_case));
  cmd->add_option("--infer_precision", o.precision,
                  "Inference precision (INFERENCE_PRECISION_HINT); a bf16 blob only imports on "
                  "CPUs with the same bf16 ISA")
      ->option_text("f32|bf16")
      ->check(CLI::IsMember({"f32", "bf16"}, CLI::ignore_case));
  cmd->add_flag("--verify", o.verify, "Import the written blob and report the import time");
  return cmd;
}

int run_compile(const CompileOptions& options) {
  try {
    return compile(options);
  } catch (const std::exception& e) {
    std::cerr << "troupe compile: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace troupe::apps
