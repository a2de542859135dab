#include "engine/graph/thread_policy.hpp"

#include <omp.h>

#include <algorithm>

namespace troupe::detail {

namespace {

// Below this many multiply-accumulates per compute node on average, a node runs in tens of
// microseconds on one core: the ONNX MLP export of benchmarks/models (about 0.13 M per node) ran
// 0.13 ms per request on one thread and 0.20 ms on two; ResNet-50 (about 77 M) gains from two.
constexpr int64_t min_macs_per_node_to_split = 2'000'000;
constexpr int64_t int8_macs_per_f32_mac = 4;

// Bounds for running execute on the scheduler (choose_execute_threads): the ONNX MLP export of
// benchmarks/models (0.4 M multiply-accumulates, 0.4 M weights) runs in about 80 us on one core of
// the 2-core AVX-512 Xeon this was measured on, its weights coming from L3; ten times that stays
// under a millisecond. On that machine, `troupe bench -m mlp.onnx -hint throughput -t 4` went
// from 3.4 to 1.3 voluntary context switches per request and from 14.6 k to 18.9 k requests/s
// (medians of 6 interleaved runs against the previous build).
constexpr int64_t max_macs_on_scheduler = 4'000'000;
constexpr int64_t max_value_elements_on_scheduler = 1'000'000;

// Elements of a shape whose dynamic dimensions (a batch chosen at run time) count as 1.
int64_t elements_at_least_one(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d == Shape::dynamic ? 1 : d;
  return n;
}

// The input holding a product's weights (its second operand), or -1 for a node that is not a
// convolution or matrix product. The integer forms count too: a quantized model's layers are
// QLinearConv / QLinearMatMul after the QDQ fusion, and an int8 ResNet is no smaller a job than
// its float form.
int weight_input(const Node& node) {
  const std::string& op = node.op_type;
  if (op == "Conv" || op == "ConvTranspose" || op == "MatMul" || op == "Gemm" ||
      op == "ConvInteger" || op == "MatMulInteger")
    return 1;
  if (op == "QLinearConv" || op == "QLinearMatMul") return 3;
  return -1;
}

}  // namespace

int64_t estimate_macs(const Model& model, int64_t integer_divisor) {
  int64_t total = 0;
  for (const Node& node : model.nodes()) {
    const int w = weight_input(node);
    const bool conv = node.op_type.find("Conv") != std::string::npos;
    if (w < 0 || node.inputs.size() <= static_cast<size_t>(w) || node.outputs.empty()) continue;
    const Shape& out = model.value(node.outputs[0]).shape;
    const Shape& weights = model.value(node.inputs[w]).shape;
    if (!weights.is_static() || weights.rank() < 2) continue;
    int64_t per_output = 0;
    if (conv) {
      // Conv weights [OC, IC/group, k...]: each output sums IC/group x k... products
      // (ConvTranspose [IC, OC/group, k...]: the same count per input, close enough).
      per_output = 1;
      for (size_t i = 1; i < weights.rank(); ++i) per_output *= weights[i];
    } else {
      const bool trans_b = node.op_type == "Gemm" && node.attributes.get_int_or("transB", 0) != 0;
      per_output = trans_b ? weights[weights.rank() - 1] : weights[weights.rank() - 2];
    }
    const bool integer =
        node.op_type.rfind("QLinear", 0) == 0 || node.op_type.find("Integer") != std::string::npos;
    total += elements_at_least_one(out) * per_output / (integer ? integer_divisor : 1);
  }
  return total;
}

void fit_threads_to_model(CompileConfig& config, const Model& model) {
  if (config.inference_num_threads > 0 || config.num_streams != 1 || config.threads_per_stream <= 1)
    return;
  int64_t compute_nodes = 0;
  for (const Node& node : model.nodes())
    if (weight_input(node) >= 0) ++compute_nodes;
  // An int8 multiply-accumulate costs about a quarter of an f32 one (VNNI's vpdpbusd sums four
  // u8 x s8 products per 32-bit lane where an FMA does one), so a node's time, which is what
  // decides whether splitting it pays, counts its integer work at a quarter. Measured
  // (`troupe bench -hint latency`, Zen 5, QDQ models of `troupe quantize`): ResNet-18 int8
  // (about 22 M f32-equivalent per node) 6.3 -> 4.2 ms on two threads, while EfficientNet-B0
  // int8 (about 1.2 M) went from 7.5 to 12.7 ms on two and MobileNetV2 (1.4 M) from 3.2 to 3.4.
  const int64_t macs = estimate_macs(model, int8_macs_per_f32_mac);
  if (compute_nodes == 0 || macs / compute_nodes < min_macs_per_node_to_split)
    config.threads_per_stream = 1;
}

void choose_execute_threads(CompileConfig& config, const Model& model, size_t workers) {
  int64_t constant_elements = 0, other_elements = 0, input_elements = 0;
  for (ValueId v = 0; v < static_cast<ValueId>(model.values().size()); ++v) {
    const int64_t n = elements_at_least_one(model.value(v).shape);
    (model.is_constant(v) ? constant_elements : other_elements) += n;
  }
  for (ValueId v : model.inputs()) input_elements += elements_at_least_one(model.value(v).shape);
  // How many times the smallest run (dynamic dimensions 1) may be scaled and stay small: the
  // multiply-accumulates and everything but the constants grow with it.
  int64_t scale = max_macs_on_scheduler / std::max<int64_t>(1, estimate_macs(model));
  if (other_elements > 0)
    scale = std::min(scale, (max_value_elements_on_scheduler - constant_elements) / other_elements);
  // Streams beyond the workers would wait for each other; a merged batch is a long run.
  config.execute_on_scheduler = config.threads_per_stream == 1 && config.auto_batch_max_size <= 1 &&
                                static_cast<size_t>(config.num_streams) <= workers && scale >= 1;
  config.scheduled_input_elements_limit = config.execute_on_scheduler ? scale * input_elements : 0;
}

}  // namespace troupe::detail
