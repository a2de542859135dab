#pragma once

#include <memory>

#include "kernels/kernel_registry.hpp"

namespace troupe::kernels::onednn {

/// A kernel for an RNN or LSTM node of a bf16 model on oneDNN's recurrent primitive computing in
/// bf16, or nullptr where troupe's f32 sgemm kernel serves better or alone (f32 models, CPUs
/// without bf16 instructions, GRU, non-default activations, clip, peepholes, sequence_lens,
/// weights that are not constants).
std::unique_ptr<Kernel> make_recurrent_primitive(const KernelRequest& request);

}  // namespace troupe::kernels::onednn
