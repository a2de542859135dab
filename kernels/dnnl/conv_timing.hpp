#pragma once

// Which of two convolution primitives for the same node runs faster on this CPU, measured once
// per shape and remembered for the process: where oneDNN offers two real kernels whose speeds
// cross over in ways no rule of thumb predicted (bf16 direct against f32 Winograd, see conv.cpp).

#include <oneapi/dnnl/dnnl.hpp>

#include <string>

namespace troupe::kernels::onednn {

/// The median time in microseconds of a few runs of `pd` (after one warm-up) on zero-filled
/// operands, on one thread. `with_bias`: the primitive takes a bias. Data-independent enough for
/// a choice: the kernels' speed does not depend on the values.
double time_convolution(const dnnl::convolution_forward::primitive_desc& pd, bool with_bias);

/// Whether `candidate` is worth taking over `baseline` (at most `margin` times its time), timed
/// once for `shape_key` (everything the two depend on) and remembered: every stream and shape
/// specialization of a model, and other models with the same convolution, get the same answer.
bool faster_convolution(const std::string& shape_key,
                        const dnnl::convolution_forward::primitive_desc& candidate,
                        const dnnl::convolution_forward::primitive_desc& baseline, bool with_bias,
                        double margin);

}  // namespace troupe::kernels::onednn
