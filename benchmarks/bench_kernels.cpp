// Kernel throughput, oneDNN backend next to the reference kernels, on two shapes that dominate
// real models: a ResNet-style 3x3 convolution (64->64 channels, 56x56) and a BERT-style MatMul
// (128x768 by 768x768). Each benchmark reports GFLOP/s and, as its label, the implementation.
// oneDNN's thread count follows OMP_NUM_THREADS; the reference kernels are single-threaded.
//
//   OMP_NUM_THREADS=1 build/bin/troupe_benchmarks --benchmark_filter=Kernel

#include <benchmark/benchmark.h>

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
    in.push_back(ValueInfo{"x" + std::to_string(i), ElementType::f32, w.inputs[i].shape()});
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
  std::vector<Tensor> outputs{Tensor(ElementType::f32, out[0].shape)};
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

void BM_KernelConv3x3_64x56x56(benchmark::State& state, const char* backend) {
  run_kernel(state, conv3x3(), backend);
}
void BM_KernelMatMul_128x768x768(benchmark::State& state, const char* backend) {
  run_kernel(state, matmul_bert(), backend);
}

BENCHMARK_CAPTURE(BM_KernelConv3x3_64x56x56, dnnl, "dnnl")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelConv3x3_64x56x56, reference, "reference")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelMatMul_128x768x768, dnnl, "dnnl")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelMatMul_128x768x768, reference, "reference")
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace troupe
