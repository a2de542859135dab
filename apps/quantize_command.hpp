#pragma once

// `troupe quantize`: post-training static quantization. An fp32 ONNX model and a folder of
// calibration inputs (.npy) in; a QDQ ONNX model out (s8 weights per output channel, u8
// activations per tensor, i32 biases) that troupe and ONNX Runtime both run in int8, and a
// report of what quantization cost on held-out samples.

#include <set>
#include <string>

namespace CLI {
class App;
}

namespace troupe::apps {

struct QuantizeOptions {
  std::string model_path;
  std::string calibration_dir;
  std::string output_path;  // empty: <model stem>.int8.onnx beside the model
  std::string method = "minmax";
  double percentile = 99.999;
  std::set<std::string> exclude;  // node names or op types kept in fp32
  int holdout = -1;               // samples kept out of calibration to evaluate; -1: a fifth, <= 32
  bool reduce_range = false;
  bool per_tensor = false;
  bool sensitivity = false;
};

/// Adds the `quantize` subcommand to `app`, parsing into `options`.
CLI::App* add_quantize_command(CLI::App& app, QuantizeOptions& options);

/// Calibrates, writes the QDQ model and prints the report; returns the process exit code.
/// Errors go to stderr.
int run_quantize(const QuantizeOptions& options);

}  // namespace troupe::apps
