#pragma once

// Helpers of the graph-transformation tests: compile a model with and without
// DISABLE_TRANSFORMATIONS, run both on the same inputs, compare, and inspect the runtime model.

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../test_util.hpp"
#include "troupe/core.hpp"
#include "troupe/properties.hpp"

namespace troupe::test {

struct RunResult {
  std::shared_ptr<const Model> runtime;
  std::map<std::string, std::vector<float>> outputs;
};

inline RunResult compile_and_run(const std::shared_ptr<Model>& model, bool disable,
                                 const std::map<std::string, Tensor>& inputs) {
  Core core;
  CompiledModel compiled =
      core.compile_model(model, "CPU", {{props::disable_transformations, disable}});
  InferRequest request = compiled.create_infer_request();
  for (const auto& [name, tensor] : inputs) request.set_tensor(name, tensor);
  request.infer();
  RunResult run{compiled.runtime_model(), {}};
  for (ValueId out : model->outputs()) {
    const std::string& name = model->value(out).name;
    run.outputs[name] = request.get_tensor(name).to_vector<float>();
  }
  return run;
}

/// Random values in [-range, range) for every model input, seeded by position from `first_seed`.
inline std::map<std::string, Tensor> random_inputs(const Model& model, unsigned first_seed,
                                                   float range) {
  std::map<std::string, Tensor> inputs;
  unsigned seed = first_seed;
  for (ValueId in : model.inputs())
    inputs[model.value(in).name] = random_tensor(model.value(in).shape, seed++, -range, range);
  return inputs;
}

/// Element-wise |a - e| <= 1e-4 |e| + atol; reports the first mismatch only.
inline void expect_close(const std::vector<float>& actual, const std::vector<float>& expected,
                         const std::string& what, double atol = 1e-5) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double tolerance = 1e-4 * std::abs(expected[i]) + atol;
    if (std::abs(actual[i] - expected[i]) > tolerance) {
      EXPECT_NEAR(actual[i], expected[i], tolerance) << what << " element " << i;
      return;
    }
  }
}

/// Compiles both ways on `inputs`, checks the outputs agree and that the untransformed graph kept
/// every node; returns {untransformed run, transformed run}.
inline std::pair<RunResult, RunResult> compare_with_untransformed(
    const std::shared_ptr<Model>& model, const std::map<std::string, Tensor>& inputs,
    double atol = 1e-5) {
  RunResult plain = compile_and_run(model, true, inputs);
  RunResult transformed = compile_and_run(model, false, inputs);
  EXPECT_EQ(plain.runtime->nodes().size(), model->nodes().size());
  for (const auto& [name, values] : plain.outputs) {
    EXPECT_EQ(transformed.outputs.count(name), 1u) << name;
    expect_close(transformed.outputs[name], values, name, atol);
  }
  return {std::move(plain), std::move(transformed)};
}

inline const Node& node_named(const Model& model, const std::string& name) {
  auto index = model.find_node(name);
  if (!index) throw std::runtime_error("no node '" + name + "' in the runtime model");
  return model.nodes()[*index];
}

inline std::vector<std::string> original_names(const Node& node) {
  return std::get<std::vector<std::string>>(node.attributes.all().at("original_names"));
}

/// A rank-0 f32 tensor, as exporters write a scale, an epsilon or an exponent.
inline Tensor scalar(float v) {
  return Tensor::from_vector<float>(Shape{}, {v});
}

inline std::vector<std::string> op_types(const Model& model) {
  std::vector<std::string> types;
  for (const Node& n : model.nodes()) types.push_back(n.op_type);
  return types;
}

}  // namespace troupe::test
