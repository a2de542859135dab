#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "troupe/model.hpp"

namespace troupe::kernels {

/// Whether a Conv node with weights of dims `weights` has the geometry Winograd kernels compute
/// well: 2-D ([OC, IC/group, 3, 3]), one group, stride 1, no dilation, input and output channels
/// in whole blocks of `channel_block` (16: oneDNN's AVX-512 kernels; 8: troupe's AVX2 one).
/// oneDNN pads other channel counts to 16: VGG-11's first convolution (3 channels in) took 2.35x
/// the direct kernel's time, its others 0.37-0.60x.
inline bool winograd_geometry(const Node& conv, const std::vector<int64_t>& weights,
                              int64_t channel_block) {
  const auto ones = [&](const char* attribute) {
    const std::vector<int64_t> v = conv.attributes.get_ints_or(attribute, {});
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 1; });
  };
  const auto whole_blocks = [&](int64_t channels) {
    return channels > 0 && channels % channel_block == 0;
  };
  return conv.attributes.get_int_or("group", 1) == 1 && weights.size() == 4 && weights[2] == 3 &&
         weights[3] == 3 && whole_blocks(weights[0]) && whole_blocks(weights[1]) &&
         ones("strides") && ones("dilations");
}

/// Whether oneDNN's AVX-512 Winograd kernels compute such a Conv node: winograd_geometry with
/// 16-channel blocks. (They take ReLU and the residual sum as post-ops; the convolution kernel
/// applies any other fused activation after them.) Both the layout choice (a model's share of
/// such convolutions) and the convolution kernel ask this one question.
inline bool winograd_shape(const Node& conv, const std::vector<int64_t>& weights) {
  return winograd_geometry(conv, weights, 16);
}

}  // namespace troupe::kernels
