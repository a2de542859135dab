// Kernel throughput, oneDNN backend next to the reference kernels, on two shapes that dominate
// real models: a ResNet-style 3x3 convolution (64->64 channels, 56x56) and a BERT-style MatMul
// (128x768 by 768x768). Each benchmark reports GFLOP/s and, as its label, the implementation.
// oneDNN's thread count follows OMP_NUM_THREADS; the reference kernels are single-threaded.
// Then a batch-1 product by a constant B read from memory (a decoder step's projection, a
// classifier head), troupe's kernel next to oneDNN's sgemm on the same matrices, in GB/s of B.
// Then depthwise convolutions oneDNN runs as an im2col GEMM (QuartzNet's 1-D ones with 33 taps,
// X3D's 3x3x3 ones), troupe's loops next to that GEMM (TROUPE_DEPTHWISE_ROWS=0), in GFLOP/s.
// Then MaxPool with its Indices output (ENet's 2x2 pool of [1, 16, 256, 256]), troupe's loops
// next to the reference kernel that ran it before (GFLOP/s counts one comparison per tap).
// Then an LSTM layer at batch 1, troupe's steps on blocks of units next to one sgemm per step.
// FourRows: four rows by a constant (a small dynamic batch), which run oneDNN's matmul (brgemm):
// the panels of the one- and two-row loop measured only 3% faster there (467 against 482 us).
//
//   OMP_NUM_THREADS=1 build/bin/troupe_benchmarks --benchmark_filter=Kernel

#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/ops/op_schema.hpp"
#include "kernels/kernel_registry.hpp"

namespace troupe {
namespace {

using kernels::Kernel;
using kernels::KernelRegistry;
using kernels::KernelRequest;

Tensor random_tensor(const Shape& shape, unsigned seed) {
  Tensor t(ElementType::f32, shape);
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.size(); ++i) p[i] = dist(engine);
  return t;
}

// One node with its inputs; inputs flagged constant are handed to the kernel as model constants
// (so oneDNN packs weights once, as in a compiled model).
struct Workload {
  Node node;
  std::vector<Tensor> inputs;
  std::vector<bool> constant;
  double flops;
};

void run_kernel(benchmark::State& state, const Workload& w, const std::string& backend) {
  std::vector<ValueInfo> in;
  std::vector<const Tensor*> constants;
  for (size_t i = 0; i < w.inputs.size(); ++i) {
    in.push_back(
        ValueInfo{"x" + std::to_string(i), w.inputs[i].element_type(), w.inputs[i].shape()});
    constants.push_back(w.constant[i] ? &w.inputs[i] : nullptr);
  }
  const OpSchema* schema = OpSchemaRegistry::instance().find(w.node.op_type);
  const std::vector<ValueInfo> out = schema->infer(ShapeInferContext{w.node, in, constants});
  std::unique_ptr<Kernel> kernel =
      KernelRegistry::instance().create_with(backend, KernelRequest{w.node, in, out, constants});
  if (!kernel) {
    state.SkipWithError(("no " + backend + " kernel").c_str());
    return;
  }
  std::vector<Tensor> outputs;
  for (const ValueInfo& v : out) outputs.emplace_back(v.type, v.shape);
  kernel->execute(w.inputs, outputs);  // warm-up: first-touch, JIT caches
  for (auto _ : state) {
    kernel->execute(w.inputs, outputs);
    benchmark::DoNotOptimize(outputs[0].raw_data());
  }
  state.SetLabel(kernel->implementation());
  state.counters["GFLOP/s"] =
      benchmark::Counter(w.flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

const Workload& conv3x3() {
  static const Workload w = [] {
    Workload w;
    w.node.name = "conv3x3";
    w.node.op_type = "Conv";
    w.node.attributes = Attributes{{"kernel_shape", std::vector<int64_t>{3, 3}},
                                   {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    w.inputs = {random_tensor({1, 64, 56, 56}, 1), random_tensor({64, 64, 3, 3}, 2),
                random_tensor({64}, 3)};
    w.constant = {false, true, true};
    w.flops = 2.0 * 64 * 56 * 56 * 64 * 3 * 3;
    return w;
  }();
  return w;
}

const Workload& matmul_bert() {
  static const Workload w = [] {
    Workload w;
    w.node.name = "matmul";
    w.node.op_type = "MatMul";
    w.inputs = {random_tensor({128, 768}, 4), random_tensor({768, 768}, 5)};
    w.constant = {false, true};
    w.flops = 2.0 * 128 * 768 * 768;
    return w;
  }();
  return w;
}

// A depthwise convolution of `channels` planes of `spatial` dims, kernel `window` (stride 1,
// padded to keep the size), with bias.
Workload depthwise(const std::string& name, int64_t channels, const std::vector<int64_t>& spatial,
                   const std::vector<int64_t>& window) {
  Workload w;
  w.node.name = name;
  w.node.op_type = "Conv";
  std::vector<int64_t> pads;
  for (int64_t k : window) pads.push_back(k / 2);
  const std::vector<int64_t> begin = pads;
  pads.insert(pads.end(), begin.begin(), begin.end());
  w.node.attributes = Attributes{{"kernel_shape", window}, {"pads", pads}, {"group", channels}};
  std::vector<int64_t> x{1, channels}, weights{channels, 1};
  x.insert(x.end(), spatial.begin(), spatial.end());
  weights.insert(weights.end(), window.begin(), window.end());
  w.inputs = {random_tensor(Shape(x), 6), random_tensor(Shape(weights), 7),
              random_tensor({channels}, 8)};
  w.constant = {false, true, true};
  w.flops = 2.0 * static_cast<double>(channels);
  for (int64_t d : spatial) w.flops *= static_cast<double>(d);
  for (int64_t k : window) w.flops *= static_cast<double>(k);
  return w;
}

// troupe's loops, or with `gemm` oneDNN's choice (the switch is read when the kernel is made).
void run_depthwise(benchmark::State& state, const Workload& w, bool gemm) {
  if (gemm) setenv("TROUPE_DEPTHWISE_ROWS", "0", 1);
  run_kernel(state, w, "dnnl");
  if (gemm) unsetenv("TROUPE_DEPTHWISE_ROWS");
}

void BM_KernelDepthwise1d_256x200_k33(benchmark::State& state, bool gemm) {
  static const Workload w = depthwise("dw1d", 256, {200}, {33});
  run_depthwise(state, w, gemm);
}
void BM_KernelDepthwise3d_54x13x40x40_k3(benchmark::State& state, bool gemm) {
  static const Workload w = depthwise("dw3d", 54, {13, 40, 40}, {3, 3, 3});
  run_depthwise(state, w, gemm);
}

// An LSTM layer of 256 units over 64 steps of 256 features, batch 1 (R: 1 MB), troupe's steps on
// blocks of units next to one sgemm per step (TROUPE_RECURRENT_STEPS=0), both with the input
// projection on sgemm.
void BM_KernelLstm_256x64(benchmark::State& state, bool sgemm) {
  static const Workload w = [] {
    Workload w;
    w.node.name = "lstm";
    w.node.op_type = "LSTM";
    w.node.attributes = Attributes{{"hidden_size", int64_t{256}}};
    w.node.outputs.assign(3, 0);
    w.inputs = {random_tensor({64, 1, 256}, 12), random_tensor({1, 1024, 256}, 13),
                random_tensor({1, 1024, 256}, 14), random_tensor({1, 2048}, 15)};
    w.constant = {false, true, true, true};
    w.flops = 2.0 * 64 * (1024 * 256 * 2);
    return w;
  }();
  if (sgemm) setenv("TROUPE_RECURRENT_STEPS", "0", 1);
  run_kernel(state, w, "dnnl");
  if (sgemm) unsetenv("TROUPE_RECURRENT_STEPS");
}

void BM_KernelMaxPoolIndices_16x256x256(benchmark::State& state, const char* backend) {
  static const Workload w = [] {
    Workload w;
    w.node.name = "max_pool_indices";
    w.node.op_type = "MaxPool";
    w.node.attributes = Attributes{{"kernel_shape", std::vector<int64_t>{2, 2}},
                                   {"strides", std::vector<int64_t>{2, 2}}};
    w.node.outputs.assign(2, 0);
    w.inputs = {random_tensor({1, 16, 256, 256}, 9)};
    w.constant = {false};
    w.flops = 16.0 * 128 * 128 * 4;
    return w;
  }();
  run_kernel(state, w, backend);
}

void BM_KernelConv3x3_64x56x56(benchmark::State& state, const char* backend) {
  run_kernel(state, conv3x3(), backend);
}
void BM_KernelMatMul_128x768x768(benchmark::State& state, const char* backend) {
  run_kernel(state, matmul_bert(), backend);
}

// y[1, N] = x[1, K] B for `copies` distinct constant B of K x N (B stored [N, K] with
// `transposed`, as a Linear layer's weight in a Gemm): together far larger than the last-level
// cache, so that each run reads its B from memory, as a model's weights are between requests.
struct RowProducts {
  std::vector<Workload> workloads;
  int64_t k = 0, n = 0;
  bool transposed = false;
  int64_t rows = 1;
};

const RowProducts& row_products(int64_t k, int64_t n, bool transposed, int64_t rows = 1) {
  static std::vector<std::unique_ptr<RowProducts>> made;
  for (const auto& p : made)
    if (p->k == k && p->n == n && p->transposed == transposed && p->rows == rows) return *p;
  auto p = std::make_unique<RowProducts>();
  p->k = k;
  p->n = n;
  p->transposed = transposed;
  p->rows = rows;
  const int64_t bytes = k * n * 4;
  const int64_t copies = std::max<int64_t>(2, (int64_t{512} << 20) / bytes);
  for (int64_t c = 0; c < copies; ++c) {
    Workload w;
    w.node.name = "row_product";
    w.node.op_type = transposed ? "Gemm" : "MatMul";
    if (transposed) w.node.attributes = Attributes{{"transB", int64_t{1}}};
    w.inputs = {random_tensor({rows, k}, 10), random_tensor(transposed ? Shape{n, k} : Shape{k, n},
                                                            static_cast<unsigned>(11 + c))};
    w.constant = {false, true};
    w.flops = 2.0 * k * n * rows;
    p->workloads.push_back(std::move(w));
  }
  made.push_back(std::move(p));
  return *made.back();
}

void run_row_products(benchmark::State& state, const RowProducts& p) {
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::vector<std::vector<Tensor>> outputs;
  for (const Workload& w : p.workloads) {
    std::vector<ValueInfo> in;
    std::vector<const Tensor*> constants;
    for (size_t i = 0; i < w.inputs.size(); ++i) {
      in.push_back(
          ValueInfo{"x" + std::to_string(i), w.inputs[i].element_type(), w.inputs[i].shape()});
      constants.push_back(w.constant[i] ? &w.inputs[i] : nullptr);
    }
    const std::vector<ValueInfo> out = OpSchemaRegistry::instance()
                                           .find(w.node.op_type)
                                           ->infer(ShapeInferContext{w.node, in, constants});
    kernels.push_back(
        KernelRegistry::instance().create_with("dnnl", KernelRequest{w.node, in, out, constants}));
    outputs.push_back({Tensor(ElementType::f32, out[0].shape)});
    kernels.back()->execute(w.inputs, outputs.back());
  }
  size_t i = 0;
  for (auto _ : state) {
    kernels[i]->execute(p.workloads[i].inputs, outputs[i]);
    benchmark::DoNotOptimize(outputs[i][0].raw_data());
    i = (i + 1) % kernels.size();
  }
  state.SetLabel(kernels[0]->implementation());
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(p.k * p.n * 4) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

// The peer: oneDNN's BLAS-like sgemm on the same matrices, read in place.
void run_row_products_on_sgemm(benchmark::State& state, const RowProducts& p) {
  std::vector<float> y(static_cast<size_t>(p.rows * p.n));
  size_t i = 0;
  for (auto _ : state) {
    const Workload& w = p.workloads[i];
    dnnl_sgemm('N', p.transposed ? 'T' : 'N', p.rows, p.n, p.k, 1.f, w.inputs[0].data<float>(), p.k,
               w.inputs[1].data<float>(), p.transposed ? p.k : p.n, 0.f, y.data(), p.n);
    benchmark::DoNotOptimize(y.data());
    i = (i + 1) % p.workloads.size();
  }
  state.SetLabel("onednn sgemm");
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(p.k * p.n * 4) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

void BM_KernelRowTimesMatrix_768x3072(benchmark::State& state, bool sgemm) {
  const RowProducts& p = row_products(768, 3072, false);
  sgemm ? run_row_products_on_sgemm(state, p) : run_row_products(state, p);
}
void BM_KernelRowTimesTransposed_4096x1000(benchmark::State& state, bool sgemm) {
  const RowProducts& p = row_products(4096, 1000, true);
  sgemm ? run_row_products_on_sgemm(state, p) : run_row_products(state, p);
}
// Four rows (a small dynamic batch through a classifier head or fully connected layer).
void BM_KernelFourRowsTimesTransposed_4096x1000(benchmark::State& state, bool sgemm) {
  const RowProducts& p = row_products(4096, 1000, true, 4);
  sgemm ? run_row_products_on_sgemm(state, p) : run_row_products(state, p);
}
void BM_KernelRowTimesTransposed_768x3072(benchmark::State& state, bool sgemm) {
  const RowProducts& p = row_products(768, 3072, true);
  sgemm ? run_row_products_on_sgemm(state, p) : run_row_products(state, p);
}

BENCHMARK_CAPTURE(BM_KernelRowTimesMatrix_768x3072, troupe, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelRowTimesMatrix_768x3072, onednn_sgemm, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelRowTimesTransposed_4096x1000, troupe, false)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelRowTimesTransposed_4096x1000, onednn_sgemm, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelFourRowsTimesTransposed_4096x1000, troupe, false)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelFourRowsTimesTransposed_4096x1000, onednn_sgemm, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelRowTimesTransposed_768x3072, troupe, false)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelRowTimesTransposed_768x3072, onednn_sgemm, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelDepthwise1d_256x200_k33, troupe, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelDepthwise1d_256x200_k33, onednn_gemm, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelDepthwise3d_54x13x40x40_k3, troupe, false)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelDepthwise3d_54x13x40x40_k3, onednn_gemm, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelLstm_256x64, troupe, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelLstm_256x64, onednn_sgemm, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelMaxPoolIndices_16x256x256, dnnl, "dnnl")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelMaxPoolIndices_16x256x256, reference, "reference")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_KernelConv3x3_64x56x56, dnnl, "dnnl")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelConv3x3_64x56x56, reference, "reference")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelMatMul_128x768x768, dnnl, "dnnl")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelMatMul_128x768x768, reference, "reference")
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace troupe
