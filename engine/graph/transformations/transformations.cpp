// The pass pipeline compile_graph runs (unless disable_transformations).
#include "engine/graph/transformations/transformations.hpp"

namespace troupe::transformations {

std::vector<std::string> original_names_of(const OriginalNames& names, const std::string& node) {
  auto it = names.find(node);
  return it != names.end() ? it->second : std::vector<std::string>{node};
}

size_t run_shape_dependent(Model& model) {
  return transpose_tokens_as_images(model);
}

OriginalNames run_all(Model& model, ElementType inference_precision) {
  OriginalNames names;
  // Quantized layers first, while their weights are still integer constants read through
  // DequantizeLinear. Then folding: it turns shape computations and weight preprocessing into
  // constants, which BatchNorm folding needs (constant Conv weights) and which leaves dead
  // producers behind.
  eliminate_identities(model);
  fuse_qdq(model, names);
  move_quantized_data(model, names);
  fold_constants(model);
  // An If on a condition folding made constant (a shape test) is its branch; what the branch
  // computes from constants folds in turn.
  if (inline_constant_branches(model) > 0) fold_constants(model);
  // Again: an exported Dropout's training_mode is a Constant node until folding.
  eliminate_identities(model);
  elide_broadcast_expands(model, names);
  scatter_whole_rows(model);
  shorten_sorted_prefixes(model);
  permute_einsums_as_transposes(model, names);
  contract_einsums_in_pairs(model);
  // After the pairing, whose steps can be such products.
  multiply_einsums_elementwise(model);
  eliminate_dead_code(model);
  // After folding: the Reshapes' targets are constants and the Shape nodes reading the images
  // are gone.
  run_shape_dependent(model);
  fuse_pad_into_window(model, names);
  // After the Pad folding (a folded Pad's padding can be what a tap reads), before the fusions:
  // a convolution trimmed to 1x1 is one the depthwise fusion can take.
  trim_padding_taps(model);
  fold_batch_norm_into_conv(model, names);
  fold_batch_norm_into_joined_convs(model, names);
  normalize_through_transposes(model, names);
  // After the folding: a branch's BatchNormalization is in its convolution's weights by then.
  merge_summed_convolutions(model, names);
  // After the folding (the weights are constants then), before the fusions, which take the
  // rewritten depthwise convolution as any other.
  repeat_channels_for_depthwise(model);
  // Bias before scale: the fused contract scales the biased product, s * (AB + b). Gelu before
  // the post-op fusion, which folds the Gelu node into the MatMul before it; SiLU likewise.
  fuse_matmul_bias(model, names);
  fuse_matmul_scale(model, names);
  if (inference_precision == ElementType::f32) fuse_attention(model, names);
  // After the attention fusion, which takes the Transposes feeding its Q, K and V itself.
  read_transposed_b(model, names);
  fuse_layer_norm(model, names);
  // After the layer normalization's fusion: a ReduceMean over the last two axes of a rank-4 value
  // may be a layer normalization's.
  pool_spatial_reductions(model);
  fuse_gelu(model, names);
  fuse_silu(model, names);
  fuse_mish(model, names);
  // After those two, whose patterns hold scalar factors of their own; before the post-op fusion,
  // while the convolutions are unfused.
  fold_scales_into_conv(model, names);
  // Before the activation fusion, which takes an activation after the shuffle into the Conv.
  convolve_transposed_as_pointwise(model);
  fuse_activation_into_joined_parts(model, names);
  fuse_post_ops(model, names);
  // After the folding and the post-op fusion: the normalization and the activation after such a
  // convolution stay in the rewritten Conv.
  convolve_columns_in_1d(model);
  fuse_depthwise_into_conv(model, names);
  eliminate_dead_code(model);
  return names;
}

}  // namespace troupe::transformations
