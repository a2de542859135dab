#pragma once

#include "kernels/kernel_registry.hpp"

namespace troupe::kernels {

/// Registers the oneDNN kernels (kernels/dnnl/*.cpp) under backend "dnnl", priority 10. Each
/// factory returns nullptr for instances oneDNN cannot run (another type than f32, an attribute
/// value it lacks), so the reference kernel takes them.
void register_dnnl_kernels(KernelRegistry& registry);

namespace onednn {

// One family per file under kernels/dnnl/.
void register_convolution(KernelRegistry& registry);             // Conv
void register_deconvolution(KernelRegistry& registry);           // ConvTranspose
void register_matmul(KernelRegistry& registry);                  // MatMul Gemm
void register_einsum(KernelRegistry& registry);                  // Einsum (two operands)
void register_prelu(KernelRegistry& registry);                   // PRelu
void register_instance_normalization(KernelRegistry& registry);  // InstanceNormalization
void register_pooling(KernelRegistry& registry);     // MaxPool AveragePool Global{Average,Max}Pool
void register_max_unpool(KernelRegistry& registry);  // MaxUnpool (f32)
void register_eltwise(KernelRegistry& registry);  // Relu Sigmoid Tanh Exp Log ... Clip Gelu Round
void register_softmax(KernelRegistry& registry);  // Softmax LogSoftmax
void register_normalization(KernelRegistry& registry);   // BatchNormalization LayerNormalization
void register_binary(KernelRegistry& registry);          // Add Sub Mul Div Max Min
void register_concat(KernelRegistry& registry);          // Concat (f32)
void register_transpose(KernelRegistry& registry);       // Transpose
void register_recurrent(KernelRegistry& registry);       // RNN GRU LSTM (sgemm)
void register_strided_copies(KernelRegistry& registry);  // Slice, Split, Pad (row copies)
void register_rearrangements(KernelRegistry& registry);  // Expand Tile DepthToSpace SpaceToDepth
void register_arg_extremum(KernelRegistry& registry);    // ArgMax ArgMin (f32)
void register_lrn(KernelRegistry& registry);             // LRN
void register_sum(KernelRegistry& registry);             // Sum Mean (one shape)
void register_top_k(KernelRegistry& registry);           // TopK (f32)
void register_select(KernelRegistry& registry);          // Where (rows of a select)
void register_grid_sample(KernelRegistry& registry);     // GridSample (bilinear, nearest)
void register_attention(KernelRegistry& registry);       // ScaledDotProductAttention (f32)
void register_scatter(KernelRegistry& registry);         // ScatterElements Scatter ScatterND (f32)
void register_gather(KernelRegistry& registry);  // Gather GatherElements (row copies, any type)
void register_trigonometric(KernelRegistry& registry);  // Sin Cos (f32)
void register_roi_align(KernelRegistry& registry);      // RoiAlign (f32)
void register_comparison(KernelRegistry& registry);     // Equal Less ... (-> bool), And Or Xor
void register_cast(KernelRegistry& registry);           // Cast CastLike (numeric types)
void register_resize(KernelRegistry& registry);         // Resize (linear, half-pixel)
void register_reduction(KernelRegistry& registry);      // ReduceMean/Sum/Max/Min/Prod
void register_quantized_convolution(KernelRegistry& registry);  // QLinearConv (int8)
void register_quantized_matmul(KernelRegistry& registry);       // QLinearMatMul (int8)
void register_linear_quantization(KernelRegistry& registry);    // QuantizeLinear DequantizeLinear
void register_quantized_add(KernelRegistry& registry);          // QLinearAdd (int8)
void register_quantizing_batch_norm(KernelRegistry& registry);  // BatchNormalization -> Q
void register_quantized_concat(KernelRegistry& registry);       // QLinearConcat (int8)
void register_quantized_lookup(KernelRegistry& registry);       // QLinearLookup (int8)

}  // namespace onednn

}  // namespace troupe::kernels
