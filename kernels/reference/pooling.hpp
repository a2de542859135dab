#pragma once

#include <vector>

#include "kernels/reference/window3d.hpp"
#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

// Reference pooling kernels (ONNX semantics, 1 to 3 spatial dims for the windowed ones).
namespace troupe::kernels::reference {

/// X [N,C,D..] -> Y and, when the node has a second output, Indices (i64 flat index into X).
/// f32, f64, i8, u8.
void max_pool(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);
/// f32, f64.
void average_pool(const Node& node, const std::vector<Tensor>& inputs,
                  std::vector<Tensor>& outputs);
/// X [N,C,D..] -> Y [N,C,1..]; f32, f64.
void global_average_pool(const Node& node, const std::vector<Tensor>& inputs,
                         std::vector<Tensor>& outputs);
/// X [N,C,D..] -> Y [N,C,1..]; f32, f64, i8, u8.
void global_max_pool(const Node& node, const std::vector<Tensor>& inputs,
                     std::vector<Tensor>& outputs);
/// Y = (sum of |X|^p over each window)^(1/p), windows as AveragePool's; f32, f64.
void lp_pool(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);
/// X [N,C,D..] -> Y [N,C,1..], the p-norm of each plane; f32, f64.
void global_lp_pool(const Node& node, const std::vector<Tensor>& inputs,
                    std::vector<Tensor>& outputs);
/// X [N,C,H,W], rois [R,5] (batch index, x1, y1, x2, y2) -> Y [R,C,pooled_shape]: the max of each
/// bin of each roi (Fast R-CNN's RoI pooling); f32, f64.
void max_roi_pool(const Node& node, const std::vector<Tensor>& inputs,
                  std::vector<Tensor>& outputs);
/// The window of a MaxPool/AveragePool node over X (kernel, strides, dilations, pads, ceil_mode,
/// auto_pad), after checking that Y has the pooled shape.
Window3d pooling_window(const Node& node, const Tensor& x, const Tensor& y);
/// MaxUnpool's unpooled shape for X: (in - 1) * stride + kernel - pads per spatial dim, pads
/// ignored when an output_shape is given. Names the node when the attributes do not fit X.
std::vector<int64_t> unpooled_dims(const Node& node, const Shape& x, bool has_output_shape);
/// X [N,C,D..], I (i64 flat indices into the unpooled tensor), output_shape? -> Y with each X
/// value at its index, zeros elsewhere; f32, f64.
void max_unpool(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);

}  // namespace troupe::kernels::reference
