// Element-wise activations as loops of troupe's own, compiled once per ISA (vector_exp.hpp):
// what the eltwise kernel runs on small tensors, and on tensors of any size for the ops whose
// exponential oneDNN 2.6's JIT computes at half the loop's speed (Sigmoid and Swish on [1, 96,
// 128, 128], one Zen 5 thread: 775 and 809 us there, 368 and 375 us here); also in place after
// troupe's own kernels (InPlaceActivation: the Winograd convolution, the packed GEMM).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>

namespace troupe::kernels::onednn {

/// Whether the loop computes `algorithm` (with `beta`, for eltwise_pow) as the reference kernel
/// defines it: exactly, or through exp_of within 2e-7 relative (Exp, Sigmoid, Swish).
bool loop_computes(dnnl::algorithm algorithm, float beta);

/// Whether the loop outruns oneDNN's JIT on `algorithm` at any size (its exponential); the loop
/// computes every such algorithm.
bool loop_outruns_jit(dnnl::algorithm algorithm);

/// y[i] = f(x[i]) for i in [0, n) (x == y allowed), split over the calling thread's OpenMP team
/// when n is large. `clip_to_unit`: then clamps to [0, 1] (HardSigmoid from eltwise_linear).
void run_eltwise_loop(dnnl::algorithm algorithm, float alpha, float beta, bool clip_to_unit,
                      const float* x, float* y, int64_t n);

}  // namespace troupe::kernels::onednn
