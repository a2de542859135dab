#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../test_util.hpp"
#include "actors/pipeline_context.hpp"
#include "engine/runtime/compiled_model_impl.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/model_builder.hpp"
#include "troupe/properties.hpp"

namespace troupe::test {

/// Test-only access to a compiled model's stage hook (delays and failures inside stages).
inline void set_stage_hook(CompiledModel& compiled, actors::StageHook hook) {
  compiled.impl()->context().hook = std::move(hook);
}

/// Width of make_linear_model's input and output.
inline constexpr int64_t features = 16, classes = 8;

/// y = Relu(x · W + b) on x [?, 16]: each output row depends on its input row only, so requests
/// can be batched along the leading dimension.
inline std::shared_ptr<Model> make_linear_model() {
  ModelBuilder b("linear");
  auto x = b.input("x", ElementType::f32, {Shape::dynamic, features});
  auto w = b.constant("w", random_tensor({features, classes}, 7));
  auto bias = b.constant("b", random_tensor({classes}, 8));
  b.output(b.op("Relu", {b.op("Add", {b.op("MatMul", {x, w}), bias})}), "y");
  return b.build();
}

inline Tensor make_input(float base, int64_t width = 16, int64_t batch = 1) {
  std::vector<float> v(static_cast<size_t>(width * batch));
  for (size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(i) - 8.f;
  return Tensor::from_vector<float>({batch, width}, v);
}

inline void expect_add_relu_output(const Tensor& in, const Tensor& out) {
  ASSERT_EQ(in.shape(), out.shape());
  auto x = in.to_vector<float>();
  auto y = out.to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_FLOAT_EQ(y[i], expected_add_relu(x[i])) << i;
}

}  // namespace troupe::test
