#include "engine/graph/thread_policy.hpp"

#include <omp.h>
#include <strings.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace troupe::detail {

namespace {

bool has_static_inputs(const Model& model) {
  return std::all_of(model.inputs().begin(), model.inputs().end(),
                     [&](ValueId v) { return model.value(v).shape.is_static(); });
}

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
// A model that runs on one thread anyway (no node of it splits) runs on the workers up to four
// times those: a request then skips two thread wake-ups (~25 us on these VMs) and a worker is
// held for a run of up to a millisecond or two. `troupe bench`, Zen 5, against the 4 M bound:
// a SASRec-like recommender (50 tokens, 2 layers) at -hint latency 0.170 -> 0.118 ms and 1.24x
// throughput, LSTNet 1.08x / 1.09x; the MLP, already on the workers, unchanged.
constexpr int64_t worker_bound_factor = 4;

// A node whose run on one core is estimated below these times stays on one thread in a stream of
// several: an OpenMP parallel region costs the team's wake-up. On the 2-vCPU VMs this was measured
// on (Zen 4), an empty region took 1-2 us while libgomp's idle threads spin (its default) and 66 us
// once they sleep (OMP_WAIT_POLICY=passive): a sleeping vCPU wakes slowly. `troupe bench -hint
// latency -pc` on EfficientNet-B0, one thread against two per node, passive: global pools,
// squeeze-and-excitation convolutions and their Mul of 7-30 us took 52-65 us on two; 1x1
// convolutions gained from about 150 us (0.77x at 131 us, 1.22x at 152 us, 1.5x at 600 us).
// Spinning, splitting from 30 us rather than 150 ran EfficientNet-B0, MNASNet and RegNetX-400MF
// 1.09-1.21x faster (5 interleaved rounds), ShuffleNetV2 the same. The rates turn
// multiply-accumulates and bytes into time: about what oneDNN's convolutions of those sizes and
// its memory-bound kernels ran on one Zen 4 core.
constexpr double min_node_us_to_split = 30;
constexpr double min_node_us_to_split_sleeping = 150;
constexpr double macs_per_us = 40'000;
constexpr double bytes_per_us = 20'000;

// Elements of a shape whose dynamic dimensions (a batch chosen at run time) count as 1.
int64_t elements_at_least_one(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d == Shape::dynamic ? 1 : d;
  return n;
}

// The inputs' and outputs' value infos of `node` (undefined for an omitted optional input).
void value_infos(const Model& model, const Node& node, std::vector<ValueInfo>& inputs,
                 std::vector<ValueInfo>& outputs) {
  inputs.clear();
  outputs.clear();
  for (ValueId v : node.inputs) inputs.push_back(v == no_value ? ValueInfo{} : model.value(v));
  for (ValueId v : node.outputs) outputs.push_back(model.value(v));
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

// Whether `node` reads only some rows of its input `index`: a Gather's table (an embedding).
bool reads_rows_only(const Node& node, size_t index) {
  return index == 0 && node.op_type == "Gather";
}

}  // namespace

int64_t node_macs(const Node& node, const std::vector<ValueInfo>& inputs,
                  const std::vector<ValueInfo>& outputs, int64_t integer_divisor) {
  const int w = weight_input(node);
  const bool conv = node.op_type.find("Conv") != std::string::npos;
  if (w < 0 || inputs.size() <= static_cast<size_t>(w) || outputs.empty()) return 0;
  const Shape& out = outputs[0].shape;
  const Shape& weights = inputs[static_cast<size_t>(w)].shape;
  if (!weights.is_static() || weights.rank() < 2) return 0;
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
  return elements_at_least_one(out) * per_output / (integer ? integer_divisor : 1);
}

int64_t node_macs(const Model& model, const Node& node, int64_t integer_divisor) {
  std::vector<ValueInfo> inputs, outputs;
  value_infos(model, node, inputs, outputs);
  return node_macs(node, inputs, outputs, integer_divisor);
}

int64_t estimate_macs(const Model& model, int64_t integer_divisor) {
  int64_t total = 0;
  for (const Node& node : model.nodes()) total += node_macs(model, node, integer_divisor);
  return total;
}

bool openmp_threads_sleep_when_idle() {
  // What libgomp read once, when it was loaded: OMP_WAIT_POLICY=passive, or no spinning at all.
  // Read once here too, so every decision of the process agrees.
  static const bool sleep = [] {
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    if (policy && strcasecmp(policy, "passive") == 0) return true;
    const char* spin = std::getenv("GOMP_SPINCOUNT");
    return spin != nullptr && spin[0] == '0' && std::strtoll(spin, nullptr, 10) == 0;
  }();
  return sleep;
}

int node_threads(const Node& node, const std::vector<ValueInfo>& inputs,
                 const std::vector<ValueInfo>& outputs, int stream_threads) {
  if (stream_threads <= 1) return 0;
  const auto bytes_of = [](const ValueInfo& v) {
    return v.type == ElementType::undefined ? 0.0
                                            : static_cast<double>(elements_at_least_one(v.shape)) *
                                                  static_cast<double>(element_size(v.type));
  };
  double bytes = 0;
  // A Gather reads the rows it picks, as many as it writes, not its whole table.
  for (size_t i = 0; i < inputs.size(); ++i)
    bytes += bytes_of(reads_rows_only(node, i) && !outputs.empty() ? outputs[0] : inputs[i]);
  for (const ValueInfo& v : outputs) bytes += bytes_of(v);
  const double macs = static_cast<double>(node_macs(node, inputs, outputs, int8_macs_per_f32_mac));
  const double single_thread_us = macs / macs_per_us + bytes / bytes_per_us;
  const double limit =
      openmp_threads_sleep_when_idle() ? min_node_us_to_split_sleeping : min_node_us_to_split;
  return single_thread_us < limit ? 1 : 0;
}

void fit_threads_to_model(CompileConfig& config, const Model& model) {
  if (config.inference_num_threads > 0 || config.num_streams != 1 || config.threads_per_stream <= 1)
    return;
  // A model small enough to run on the scheduler (choose_execute_threads) runs on one thread: a
  // request alone in the pipeline then runs on the thread that submits it (Pipeline::submit),
  // with no wake-up, where a thread per stream costs two per request, more than a second thread
  // saves on a run this short, also where libgomp's idle threads spin and a node would split.
  // `troupe bench -hint latency`, two threads -> one, medians (Zen 4, 2 vCPUs): the MLP of
  // benchmarks/models exported with a static batch 30 -> 20 us, a DIN recommender 56 -> 41, a
  // 1.3 M multiply-accumulate three-convolution stack 38 -> 28, a 3.6 M two-convolution one
  // 42 -> 37. A model with dynamic inputs may be given requests far larger than its smallest
  // run: those (above scheduled_input_elements_limit) run on a thread of their own with the
  // threads the stream had (large_request_threads); the MLP with a dynamic batch, one request at
  // a time, 30 -> 20 us.
  const bool static_inputs = has_static_inputs(model);
  // (With automatic batching the merged runs are long and run on the stream's thread.)
  if (scheduler_scale(model) >= 1 && (static_inputs || config.auto_batch_max_size <= 1)) {
    if (!static_inputs) config.large_request_threads = config.threads_per_stream;
    config.threads_per_stream = 1;
    return;
  }
  // Below, the model's size decides, and a dynamic dimension counts as 1 there: a conformer block
  // exported with a dynamic batch and length looked like 0.1 M multiply-accumulates a node and
  // ran its [2, 128, 144] requests on one thread (6.5 ms against 5.0 on two, `troupe bench -hint
  // latency`, Zen 5). Its stream keeps its threads; each node, specialized for the shapes a
  // request brings, still stays on one where it is short (node_threads).
  if (!static_inputs) return;
  int64_t compute_nodes = 0;
  for (const Node& node : model.nodes())
    if (weight_input(node) >= 0) ++compute_nodes;
  // An int8 multiply-accumulate costs about a quarter of an f32 one (VNNI's vpdpbusd sums four
  // u8 x s8 products per 32-bit lane where an FMA does one), so a node's time, which is what
  // decides whether splitting it pays, counts its integer work at a quarter. Measured
  // (`troupe bench -hint latency`, Zen 5, QDQ models of `troupe quantize`): ResNet-18 int8
  // (about 22 M f32-equivalent per node) 6.3 -> 4.2 ms on two threads, while EfficientNet-B0
  // int8 (about 1.2 M) went from 7.5 to 12.7 ms on two and MobileNetV2 (1.4 M) from 3.2 to 3.4.
  // That was with threads that sleep between parallel regions. Where they spin, each node
  // decides alone (node_threads): MobileNetV3-small (about 1 M per node) ran 1.3-1.5 ms on two
  // threads against 2.4 on one (Zen 4). A model none of whose nodes would split runs on one.
  const int64_t macs = estimate_macs(model, int8_macs_per_f32_mac);
  if (openmp_threads_sleep_when_idle() &&
      (compute_nodes == 0 || macs / compute_nodes < min_macs_per_node_to_split)) {
    config.threads_per_stream = 1;
    return;
  }
  std::vector<ValueInfo> inputs, outputs;
  for (const Node& node : model.nodes()) {
    value_infos(model, node, inputs, outputs);
    if (node_threads(node, inputs, outputs, config.threads_per_stream) != 1) return;
  }
  config.threads_per_stream = 1;
}

namespace {

int64_t scale_within(const Model& model, int64_t max_macs, int64_t max_value_elements) {
  // Constants read whole: not an embedding table a Gather picks a few rows from (a recommender's
  // millions of rows, which a request touches tens of).
  std::vector<bool> read_whole(model.values().size(), false);
  for (const Node& node : model.nodes())
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (node.inputs[i] != no_value && !reads_rows_only(node, i))
        read_whole[static_cast<size_t>(node.inputs[i])] = true;
  int64_t constant_elements = 0, other_elements = 0;
  for (ValueId v = 0; v < static_cast<ValueId>(model.values().size()); ++v) {
    const int64_t n = elements_at_least_one(model.value(v).shape);
    if (!model.is_constant(v))
      other_elements += n;
    else if (read_whole[static_cast<size_t>(v)])
      constant_elements += n;
  }
  // The multiply-accumulates and everything but the constants grow with the run.
  int64_t scale = max_macs / std::max<int64_t>(1, estimate_macs(model));
  if (other_elements > 0)
    scale = std::min(scale, (max_value_elements - constant_elements) / other_elements);
  return scale;
}

}  // namespace

int64_t scheduler_scale(const Model& model) {
  return scale_within(model, max_macs_on_scheduler, max_value_elements_on_scheduler);
}

int64_t worker_scale(const Model& model) {
  return scale_within(model, worker_bound_factor * max_macs_on_scheduler,
                      worker_bound_factor * max_value_elements_on_scheduler);
}

void choose_execute_threads(CompileConfig& config, const Model& model, size_t workers) {
  int64_t input_elements = 0;
  for (ValueId v : model.inputs()) input_elements += elements_at_least_one(model.value(v).shape);
  // A model with dynamic inputs keeps the small model's bound: its estimate (dynamic dimensions
  // 1) says little of the requests it will be given, and one above the limit below takes a detached
  // helper, two more hops (a DistilBERT-like encoder given [2, 128] 0.96x throughput with the
  // larger bound).
  const bool static_inputs = has_static_inputs(model);
  const int64_t scale = static_inputs ? worker_scale(model) : scheduler_scale(model);
  // Streams beyond the workers would wait for each other; a merged batch is a long run.
  config.execute_on_scheduler = config.threads_per_stream == 1 && config.auto_batch_max_size <= 1 &&
                                static_cast<size_t>(config.num_streams) <= workers && scale >= 1;
  config.scheduled_input_elements_limit = config.execute_on_scheduler ? scale * input_elements : 0;
}

}  // namespace troupe::detail
