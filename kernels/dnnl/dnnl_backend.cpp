#include "kernels/dnnl/dnnl_backend.hpp"

namespace troupe::kernels {

void register_dnnl_kernels(KernelRegistry& registry) {
  onednn::register_convolution(registry);
  onednn::register_deconvolution(registry);
  onednn::register_matmul(registry);
  onednn::register_einsum(registry);
  onednn::register_prelu(registry);
  onednn::register_instance_normalization(registry);
  onednn::register_pooling(registry);
  onednn::register_max_unpool(registry);
  onednn::register_eltwise(registry);
  onednn::register_softmax(registry);
  onednn::register_normalization(registry);
  onednn::register_binary(registry);
  onednn::register_concat(registry);
  onednn::register_transpose(registry);
  onednn::register_recurrent(registry);
  onednn::register_strided_copies(registry);
  onednn::register_rearrangements(registry);
  onednn::register_arg_extremum(registry);
  onednn::register_lrn(registry);
  onednn::register_sum(registry);
  onednn::register_top_k(registry);
  onednn::register_resize(registry);
  onednn::register_reduction(registry);
  onednn::register_quantized_convolution(registry);
  onednn::register_quantized_matmul(registry);
  onednn::register_linear_quantization(registry);
  onednn::register_quantized_add(registry);
  onednn::register_quantizing_batch_norm(registry);
  onednn::register_select(registry);
  onednn::register_grid_sample(registry);
  onednn::register_attention(registry);
  onednn::register_scatter(registry);
  onednn::register_gather(registry);
  onednn::register_trigonometric(registry);
  onednn::register_comparison(registry);
  onednn::register_cast(registry);
  onednn::register_roi_align(registry);
  onednn::register_quantized_concat(registry);
  onednn::register_quantized_lookup(registry);
}

}  // namespace troupe::kernels
