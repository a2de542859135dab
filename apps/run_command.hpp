#pragma once

// `troupe run`: one inference on inputs read from .npy files, the outputs written as .npy files,
// so troupe's results can be compared with another framework's.

#include <string>
#include <vector>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

namespace CLI {
class App;
}

namespace troupe::apps {

struct RunOptions {
  std::string model_path;           // .onnx, .troupe or a compiled blob
  std::vector<std::string> inputs;  // "NAME=FILE.npy" (or "FILE.npy" for a one-input model)
  std::string output_dir;           // receives <output name>.npy per output
  std::string device = "CPU";
  std::string infer_precision;  // empty: the device default; f32 | bf16
};

/// Adds the `run` subcommand to `app`, parsing into `options`.
CLI::App* add_run_command(CLI::App& app, RunOptions& options);

/// Runs the inference and writes the outputs; returns the process exit code. Errors go to stderr.
int run_run(const RunOptions& options);

/// Checks that `tensor`, read from `file`, fits the model input `input`: TensorMismatch naming
/// the input and the file when the element type differs or the model's shape does not accept it.
void check_input_file(const ValueInfo& input, const Tensor& tensor, const std::string& file);

/// The file name an output is written to: its name with characters a file name cannot hold ('/'
/// and NUL) replaced by '_', plus ".npy" ("." and ".." are prefixed with '_').
std::string output_file_name(const std::string& output_name);

}  // namespace troupe::apps
