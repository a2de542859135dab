#pragma once

#include "kernels/kernel_registry.hpp"

namespace troupe::kernels::reference {

// Each family registers its op types under backend "reference" (priority 0). One file per family
// under kernels/reference/; the functions themselves are the specification of each op.
void register_elementwise(KernelRegistry& registry);     // arithmetic, math, activations, Cast
void register_softmax(KernelRegistry& registry);         // Softmax LogSoftmax Hardmax
void register_linear_algebra(KernelRegistry& registry);  // MatMul Gemm Einsum Det
void register_shape(KernelRegistry& registry);           // data movement: Reshape Slice Pad ...
void register_reduction(KernelRegistry& registry);       // Reduce* ArgMax ArgMin TopK CumSum
void register_convolution(KernelRegistry& registry);     // Conv
void register_pooling(KernelRegistry& registry);         // MaxPool AveragePool GlobalAveragePool
void register_normalization(KernelRegistry& registry);   // BatchNormalization
void register_resize(KernelRegistry& registry);          // Resize
void register_recurrent(KernelRegistry& registry);       // RNN GRU LSTM
void register_quantization(KernelRegistry& registry);    // QuantizeLinear QLinearConv ...
void register_loss(KernelRegistry& registry);            // NegativeLogLikelihoodLoss ...
void register_selection(KernelRegistry& registry);       // NonZero Compress Unique NMS
void register_signal(KernelRegistry& registry);          // windows MelWeightMatrix DFT STFT
void register_sampling(KernelRegistry& registry);        // RoiAlign GridSample
void register_training(KernelRegistry& registry);        // Adagrad Momentum Adam (training domain)
void register_text(KernelRegistry& registry);            // TfIdfVectorizer, StringNormalizer
void register_attention(KernelRegistry& registry);       // ScaledDotProductAttention (fused)

}  // namespace troupe::kernels::reference
