#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "../test_util.hpp"
#include "actors/pipeline_context.hpp"
#include "engine/ops/op_schema.hpp"
#include "engine/runtime/compiled_model_impl.hpp"
#include "kernels/kernel_registry.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/model_builder.hpp"
#include "troupe/properties.hpp"

namespace troupe::test {

/// Test-only access to a compiled model's stage hook (delays and failures inside stages).
inline void set_stage_hook(CompiledModel& compiled, actors::StageHook hook) {
  compiled.impl()->context().hook = std::move(hook);
}

/// Counts how requests completed: with their result, Cancelled, or anything else (which the
/// shutdown tests expect never to happen).
struct Outcomes {
  std::atomic<int> succeeded{0}, cancelled{0}, other{0};
  void record(std::exception_ptr error) {
    if (!error) return void(++succeeded);
    try {
      std::rethrow_exception(error);
    } catch (const Cancelled&) {
      ++cancelled;
    } catch (...) {
      ++other;
    }
  }
};

/// What a checked identity op checks in its input before passing it on.
using InputCheck = void (*)(const Node& node, const Tensor& input);

/// The checks of the registered checked identity ops, by op type (reference kernels are plain
/// functions: the kernel finds its check here).
inline std::map<std::string, InputCheck>& input_checks() {
  static std::map<std::string, InputCheck> checks;
  return checks;
}

/// Registers, once per op type, a test-only op whose output is its input, after `check(node,
/// input)` has run: a check that throws stands for a kernel that fails on some inputs.
inline void register_checked_identity(const std::string& op_type, InputCheck check) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (!input_checks().emplace(op_type, check).second) return;
  OpSchema schema;
  schema.op_type = op_type;
  schema.infer = [](const ShapeInferContext& ctx) {
    return std::vector<ValueInfo>{{"", ctx.type(0), ctx.shape(0)}};
  };
  OpSchemaRegistry::instance().add(schema);
  kernels::KernelRegistry::instance().add(
      "reference", 0, op_type, [](const kernels::KernelRequest& r) {
        return kernels::make_reference_kernel(
            r.node, [](const Node& node, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
              input_checks().at(node.op_type)(node, in[0]);
              in[0].copy_to(out[0]);
            });
      });
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
