#pragma once

// `troupe quantize`'s graph rewrite: an fp32 ONNX model and calibrated activation ranges in, the
// QDQ form out, the form ONNX Runtime's and PyTorch's quantizers write and every int8 engine reads
// (troupe's QDQ fusion included):
//
//   x -> Q (u8, per tensor) -> DQ ------------------+
//   w_s8 (per output channel) -> DQ ----------------+-> Conv/Gemm/MatMul [-> Relu] -> y -> Q -> DQ
//   bias_i32 (scale x_scale * w_scale) -> DQ -------+
//
// Products (Conv, Gemm, MatMul with a constant weight) are quantized, their results too; so are
// Add, Concat and data movement (MaxPool, Reshape, ...) when every reader of their result is
// quantized, so the activations stay int8 between layers. A tensor once quantized is read through
// its DequantizeLinear by every consumer, so its producer's fused kernel writes int8 and nothing
// reads a second float copy.

#include <map>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace troupe::apps {

struct QdqSettings {
  std::set<std::string> exclude;  // node names or op types kept in fp32
  bool per_channel = true;        // per output channel weight scales (opset >= 13)
  bool reduce_range = false;      // 7-bit weights: exact int8 kernels on CPUs without VNNI
};

/// What the rewrite would quantize in a model.
struct QdqPlan {
  std::vector<int> products;             // graph.node indices: Conv, Gemm, MatMul
  std::vector<int> propagating;          // graph.node indices: Add, Concat, data movement
  std::vector<std::string> activations;  // the float tensors that get Q -> DQ, in graph order
  std::map<std::string, std::string> shared_range;  // a data movement's output: its input
};

/// A calibrated activation range; the u8 grid is fitted to [min(lo, 0), max(hi, 0)].
struct ActivationRange {
  float lo = 0.0f;
  float hi = 0.0f;
};

/// The nodes and tensors the rewrite quantizes. Throws ModelError naming the problem when the
/// model cannot be quantized at all (opset below 10, no quantizable node).
QdqPlan plan_qdq(const onnx::ModelProto& model, const QdqSettings& settings);

/// The QDQ model. `only_products`, when not empty, restricts the products quantized to those
/// graph.node indices (with the tensors they read), for a per-layer sensitivity run. Every
/// activation the plan quantizes needs a range.
onnx::ModelProto rewrite_qdq(const onnx::ModelProto& model, const QdqPlan& plan,
                             const std::map<std::string, ActivationRange>& ranges,
                             const QdqSettings& settings,
                             const std::vector<int>& only_products = {});

/// The model with `tensors` added to its graph outputs (float), so a run returns them: how the
/// calibration sees the activations. A graph output needs a shape: `shapes` (-1 for a dynamic
/// dimension; troupe's own inference, which follows computed shapes) where it has one, else
/// onnx's shape inference.
onnx::ModelProto with_extra_outputs(const onnx::ModelProto& model,
                                    const std::vector<std::string>& tensors,
                                    const std::map<std::string, std::vector<int64_t>>& shapes);

/// Reads an ONNX model file; ModelError naming `path` when it is not one.
onnx::ModelProto read_onnx_model(const std::string& path);

/// The opset the model imports for the default ONNX domain (0 when none).
int64_t onnx_opset(const onnx::ModelProto& model);

/// Writes `model` to `path`; InvalidArgument naming `path` when it cannot be written.
void save_onnx_model(const onnx::ModelProto& model, const std::string& path);

/// Writes `model` to `path` (as save_onnx_model) after onnx's checker accepted it.
void write_onnx_model(const onnx::ModelProto& model, const std::string& path);

}  // namespace troupe::apps
