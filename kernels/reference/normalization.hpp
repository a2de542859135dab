#pragma once

#include <vector>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

// Reference normalization kernels (ONNX semantics, f32/f64 data; parameters of any floating type).
namespace troupe::kernels::reference {

/// Inference mode: Y = (X - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + B[c].
void batch_normalization(const Node& node, const std::vector<Tensor>& inputs,
                         std::vector<Tensor>& outputs);
/// Per (n, c): Y = (X - mean) / sqrt(var + epsilon) * scale[c] + B[c], statistics over D...
void instance_normalization(const Node& node, const std::vector<Tensor>& inputs,
                            std::vector<Tensor>& outputs);
/// Statistics over the dims from `axis` on; optional outputs Mean and InvStdDev.
void layer_normalization(const Node& node, const std::vector<Tensor>& inputs,
                         std::vector<Tensor>& outputs);
/// Local response normalization across channels.
void lrn(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);
void mean_variance_normalization(const Node& node, const std::vector<Tensor>& inputs,
                                 std::vector<Tensor>& outputs);
/// Y = X / ||X||_p along `axis`, p = 1 or 2 (a line of zeros stays zero).
void lp_normalization(const Node& node, const std::vector<Tensor>& inputs,
                      std::vector<Tensor>& outputs);

}  // namespace troupe::kernels::reference
