#pragma once

// The model `troupe bench` runs when no -m is given: a small image classifier built with
// ModelBuilder, with weights drawn from a fixed seed so every build and every machine runs exactly
// the same numbers. Benchmarks and tests reuse it by compiling apps/default_model.cpp.
//
//   image f32 [1,3,32,32]
//     -> Conv 3->16 3x3 pad 1 -> Relu -> MaxPool 2x2
//     -> Conv 16->32 3x3 pad 1 -> BatchNormalization -> Relu
//     -> GlobalAveragePool -> Flatten -> Gemm 32->10 -> Softmax
//   -> probabilities f32 [1,10]

#include <cstdint>
#include <memory>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

namespace troupe::apps {

inline constexpr const char* default_model_input = "image";
inline constexpr const char* default_model_output = "probabilities";
inline constexpr uint32_t default_model_seed = 2024;

/// The default CNN; `batch` is the first dimension of the input.
std::shared_ptr<Model> make_default_model(int64_t batch = 1, uint32_t seed = default_model_seed);

/// A deterministic input for the default model: values in [0, 1) from `seed`.
Tensor make_default_input(int64_t batch = 1, uint32_t seed = default_model_seed + 1);

}  // namespace troupe::apps
