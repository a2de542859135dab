#pragma once

#include <vector>

#include "troupe/pre_post_processor.hpp"
#include "troupe/tensor.hpp"

namespace troupe::kernels::preprocess {

// The image operations of the pre/postprocess stages, on 4-D tensors of any element type (the
// arithmetic is done in float). Each returns a new dense tensor or works in place on a dense one.

/// Permutes NCHW <-> NHWC.
Tensor convert_layout(const Tensor& src, Layout from, Layout to);

/// Resizes the spatial dimensions to height x width. Pixel centres are aligned (half-pixel):
/// source coordinate = (dst + 0.5) * in / out - 0.5. `linear` interpolates bilinearly between the
/// clamped neighbours; `nearest` takes floor((dst + 0.5) * in / out).
Tensor resize(const Tensor& src, Layout layout, int64_t height, int64_t width,
              ResizeAlgorithm algorithm);

/// x[c] -= values[c] (in place; one value applies to every channel). Floating types only.
void subtract_mean(Tensor& image, Layout layout, const std::vector<float>& values);

/// x[c] /= values[c] (in place). Floating types only.
void divide_scale(Tensor& image, Layout layout, const std::vector<float>& values);

/// Reverses the channel order (RGB <-> BGR).
Tensor reverse_channels(const Tensor& src, Layout layout);

/// Runs the steps of `plan` on the caller's tensor, producing the model's input (dense,
/// `model_input.type`).
Tensor run_preprocessing(const InputPreprocessing& plan, const Tensor& caller,
                         const ValueInfo& model_input);

/// Converts the model's output into the caller's layout and writes it into `caller` (element type
/// converted on copy).
void run_postprocessing(const OutputPostprocessing& plan, const Tensor& model_output,
                        Tensor& caller);

}  // namespace troupe::kernels::preprocess
