#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "troupe/model.hpp"

namespace troupe::kernels {
struct KernelRequest;
}

namespace troupe::transformations {

// Graph transformations run by compile_graph before kernels are chosen. Each pass takes a
// validated model, rewrites it in place, leaves it validated and returns how many nodes it removed
// or fused. Model outputs keep their values and names: a pass never folds away, renames or
// re-routes a value the caller reads.

// For the nodes of the transformed graph that stand for other nodes of the source graph (fusions),
// the source node names by the node's name; a node without an entry stands for itself.
using OriginalNames = std::map<std::string, std::vector<std::string>>;

// The source nodes a node of the transformed graph stands for.
std::vector<std::string> original_names_of(const OriginalNames& names, const std::string& node);

// Runs the reference kernel of `request.node` on `inputs`, into tensors of the request's output
// types and shapes; nullopt when it has none for this request or it throws. Constant folding and
// the QDQ fusion's tables compute with it, so both are what the node as written computes.
std::optional<std::vector<Tensor>> run_reference_kernel(const kernels::KernelRequest& request,
                                                        const std::vector<Tensor>& inputs);

// Evaluates, with its reference kernel, every deterministic node whose inputs are all constants
// (and Shape/Size of values with a static shape) and turns its outputs into constants.
size_t fold_constants(Model& model);

// The same on a model not validated yet, inferring shapes as it goes: folds what a model needs
// before it can validate at all, e.g. a Reshape whose target shape comes from Shape -> Gather ->
// Concat (schemas such as Reshape's require a constant target). Leaves validation to the caller.
size_t fold_constants_unvalidated(Model& model);

// Replaces an If whose condition is a constant by the nodes of the branch it takes (which read
// the values the branch captured and write the If's outputs).
size_t inline_constant_branches(Model& model);

// Removes Identity, inference Dropout and Cast to the input's own type, rewiring their readers.
size_t eliminate_identities(Model& model);

// Folds the QDQ form of quantized layers (DequantizeLinear -> Conv/MatMul/Gemm [-> activation] ->
// QuantizeLinear, and a quantized residual Add after a convolution) into QLinearConv and
// QLinearMatMul nodes with fused post-ops (engine/ops/quantized_post_ops.hpp). Runs before the
// constant folding, which would otherwise turn the dequantized weights into float ones.
size_t fuse_qdq(Model& model, OriginalNames& names);

// Moves data-movement ops (MaxPool, Flatten, Reshape, Transpose, Gather, Slice, Concat, ...)
// between a DequantizeLinear and a QuantizeLinear of the same parameters onto the integers.
size_t move_quantized_data(Model& model, OriginalNames& names);

// Removes an Expand that only an element-wise Add/Sub/Mul/Div reads against an operand of the
// result's shape: the op broadcasts the Expand's input itself.
size_t elide_broadcast_expands(Model& model, OriginalNames& names);

// Rewrites a ScatterElements along axis 0 whose indices are a column [E, 1, ...] expanded to the
// updates' shape, which scatters whole rows, as a ScatterND with that column as its tuples.
size_t scatter_whole_rows(Model& model);

// Lowers a sorted TopK's K to the longest prefix along its axis that the Slices reading it take
// (an argsort or sort followed by [..., :k] exports as a TopK of the whole axis): the kernel then
// selects k instead of sorting the axis.
size_t shorten_sorted_prefixes(Model& model);

// Removes nodes none of whose outputs is consumed or a model output.
size_t eliminate_dead_code(Model& model);

// Swaps the Transpose(0,2,1) and Reshape that turn a token sequence [B,N,C] into an image
// [B,C,S...] (and back) so the Transpose moves the image's channel axis instead: a view and a
// reorder the convolution's layout takes, in place of a transpose of [N,C]; returns the swaps.
size_t transpose_tokens_as_images(Model& model);

// Folds a zero constant Pad of the spatial axes into the Conv or AveragePool (counting the padded
// zeros) that alone reads it, as their own pads.
size_t fuse_pad_into_window(Model& model, OriginalNames& names);

// Trims from a Conv with constant weights and a static input size the kernel taps that read only
// padding at every output position (a dilated convolution on a small map: DeepLab's ASPP), as
// the same convolution with a smaller kernel and its pads reduced to match; returns how many
// it trimmed.
size_t trim_padding_taps(Model& model);

// Replaces a ReduceMean or ReduceMax over every spatial axis of an image [N, C, H, W] (or a
// volume, or a convolution's 1-D output [N, C, L]) by the GlobalAveragePool or GlobalMaxPool it
// is (which reads the convolutions' activation layout), and a Flatten where the reduction drops
// its axes. Runs after fuse_layer_norm.
size_t pool_spatial_reductions(Model& model);

// Folds an inference BatchNormalization into the Conv before it (constant weights and bias, the
// Conv output read by nothing else).
size_t fold_batch_norm_into_conv(Model& model, OriginalNames& names);

// Folds an inference BatchNormalization after a channel Concat into the Convs computing its parts
// (each its slice of the channels; every part a Conv output only the Concat reads).
size_t fold_batch_norm_into_joined_convs(Model& model, OriginalNames& names);

// Rewrites Transpose -> BatchNormalization (inference) -> the inverse Transpose as a Mul and an
// Add of the per-channel constants along the original axis.
size_t normalize_through_transposes(Model& model, OriginalNames& names);

// Merges convolutions of one input whose outputs are summed (with the input itself or its
// BatchNormalization, maybe) into one convolution: the training-time form of RepVGG, MobileOne,
// ACNet and RepLKNet branches.
size_t merge_summed_convolutions(Model& model, OriginalNames& names);

// Runs a depthwise convolution with a channel multiplier K (one input channel per group, K outputs
// each) as a depthwise convolution of its input with every channel repeated K times.
size_t repeat_channels_for_depthwise(Model& model);

// Replaces x * Tanh(Softplus(x)) by Mish(x) (YOLOv4's activation as exported before opset 18).
size_t fuse_mish(Model& model, OriginalNames& names);

// Replaces an Einsum of one operand that only permutes its axes by that Transpose.
size_t permute_einsums_as_transposes(Model& model, OriginalNames& names);

// Splits an Einsum of three or more operands into two-operand Einsums, a pair at a time.
size_t contract_einsums_in_pairs(Model& model);

// Rewrites a two-operand Einsum that contracts no label, or whose operands keep no label of their
// own, as the broadcast Mul it is (and the ReduceSum over the contracted labels), with the
// Transposes and Unsqueezes that align the operands.
size_t multiply_einsums_elementwise(Model& model);

// Folds multiplications or divisions by constants into the Conv with constant weights next to
// them: after it (scalars or one factor per output channel), or before it (scalars, each product
// read by the next step alone). Runs after fuse_gelu and fuse_silu, before fuse_post_ops.
size_t fold_scales_into_conv(Model& model, OriginalNames& names);

// Fuses a MatMul and the Add of a constant bias along its last axis into the MatMul
// ("fused_bias", see engine/ops/fused_post_ops.hpp).
size_t fuse_matmul_bias(Model& model, OriginalNames& names);

// Fuses a MatMul and a following multiplication or division by a constant scalar into the MatMul
// ("fused_scale").
size_t fuse_matmul_scale(Model& model, OriginalNames& names);

// Reads a MatMul's B through a Transpose swapping its last two axes ("fused_transpose_b"): the
// transposed copy is not written. Returns the number of Transposes absorbed.
size_t read_transposed_b(Model& model, OriginalNames& names);

// Replaces the decomposed layer normalization (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div,
// optional Mul and Add) by one LayerNormalization node.
size_t fuse_layer_norm(Model& model, OriginalNames& names);

// Replaces the decomposed exact GELU (x * 0.5 * (1 + Erf(x / sqrt 2)), in its exported orders) by
// one Gelu node.
size_t fuse_gelu(Model& model, OriginalNames& names);

// Replaces SiLU as exported, Mul(x, Sigmoid(x)) in either operand order, by one Swish node
// (x * Sigmoid(x)), which the post-op fusion then folds into the Conv/MatMul/Gemm computing x.
size_t fuse_silu(Model& model, OriginalNames& names);

// Fuses Conv/MatMul/Gemm with a following residual Add and/or activation (Relu, LeakyRelu, Clip,
// Sigmoid, Tanh, HardSwish, Gelu, Swish) into one node carrying the attributes "fused_sum" and
// "fused_activation" (see engine/ops/fused_post_ops.hpp).
size_t fuse_post_ops(Model& model, OriginalNames& names);

// Moves an activation after a Concat into the Convs, MatMuls or Gemms computing its parts, as
// their fused activation (every part read by the Concat alone). Runs before fuse_post_ops.
size_t fuse_activation_into_joined_parts(Model& model, OriginalNames& names);

// Rewrites a Conv whose kernel spans its input's whole width (no padding along it, group 1,
// more than one output row) as Transpose -> Reshape -> the 1-D Conv over the rows -> Reshape back
// to the one-column output; fused activations stay on the Conv. Returns the rewrites.
size_t convolve_columns_in_1d(Model& model);

// Rewrites a 2-D f32 ConvTranspose whose kernel equals its stride s, without padding, as a 1x1
// Conv to s*s times the channels and DepthToSpace (DCR, block s); a fused activation moves to the
// Conv. Returns the rewrites.
size_t convolve_transposed_as_pointwise(Model& model);

// Fuses a 1x1 Conv and the 3x3 depthwise Conv (stride 1 or 2, padding 1) that alone reads it into
// the 1x1 Conv ("fused_depthwise", see engine/ops/fused_post_ops.hpp). Runs after fuse_post_ops:
// both convolutions keep their fused activations.
size_t fuse_depthwise_into_conv(Model& model, OriginalNames& names);

// Fuses attention, MatMul(Q, Kt) -> [Add(mask)] -> Softmax(last axis) -> MatMul(., V), into one
// ScaledDotProductAttention node (engine/ops/attention.hpp), absorbing the scalar factors and the
// Transposes that alone feed Q, Kt or V where the kernel reads their rows in place. Runs after
// fuse_matmul_scale (the scale becomes the node's) and before fuse_post_ops (which would fold the
// mask's Add).
size_t fuse_attention(Model& model, OriginalNames& names);

// The passes that need static shapes (today transpose_tokens_as_images), also run when a stream
// specializes a graph exported with a dynamic batch, whose shapes are static only then. They keep
// the names and op types of the nodes they touch, so the specialization's nodes map onto the
// compiled graph's. Returns how many rewrites they made.
size_t run_shape_dependent(Model& model);

// Runs all passes in order; returns the original names of the rewritten nodes. The attention
// fusion only where the model computes in f32 (`inference_precision`): its kernel is f32, and
// in bf16 the products are faster unfused.
OriginalNames run_all(Model& model, ElementType inference_precision = ElementType::f32);

}  // namespace troupe::transformations
