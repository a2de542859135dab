#pragma once

// `troupe compile`: compiles a model file and exports the compiled blob, which `troupe bench -m
// model.blob` (and Core::import_model) loads without compiling again.

#include <string>

#include "troupe/any.hpp"
#include "troupe/compiled_model.hpp"
#include "troupe/core.hpp"

namespace CLI {
class App;
}

namespace troupe::apps {

struct CompileOptions {
  std::string model_path;
  std::string output_path;  // empty: the model path with the extension replaced by .blob
  std::string device = "CPU";
  std::string hint;       // empty: the device default
  std::string precision;  // empty: the device default (f32)
  bool verify = false;    // import the written blob and report the import time
};

/// Adds the `compile` subcommand to `app`, parsing into `options`.
CLI::App* add_compile_command(CLI::App& app, CompileOptions& options);

/// Compiles and exports; returns the process exit code. Errors go to stderr.
int run_compile(const CompileOptions& options);

/// Whether `path` names a compiled blob (by its `.blob` extension), as load_compiled_model decides.
bool is_blob(const std::string& path);

/// How `troupe bench` (and other tools) turn a path into a compiled model: a `.blob` file is
/// imported (Core::import_model), any other model file is compiled with
/// Core::compile_model(path, ...), which uses the model cache when `properties` set CACHE_DIR.
CompiledModel load_compiled_model(Core& core, const std::string& path, const std::string& device,
                                  const AnyMap& properties);

}  // namespace troupe::apps
