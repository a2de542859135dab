#pragma once

// Helpers for the Conv/pooling/normalization/Resize tests: one-node models for shape inference and
// direct calls of reference kernels.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel.hpp"
#include "troupe/error.hpp"
#include "troupe/model_builder.hpp"

namespace troupe::nn_test {

using ints = std::vector<int64_t>;
using floats = std::vector<float>;

inline Tensor f32(const Shape& shape, const floats& values) {
  return Tensor::from_vector<float>(shape, values);
}

inline Node make_node(const std::string& op_type, Attributes attributes = {},
                      size_t num_outputs = 1) {
  Node node;
  node.op_type = op_type;
  node.name = op_type + "_under_test";
  node.attributes = std::move(attributes);
  node.outputs.assign(num_outputs, 0);
  return node;
}

/// Runs a reference kernel with one f32 output of `out_shape` and returns its values.
inline floats run_f32(kernels::ReferenceFn fn, const Node& node, const std::vector<Tensor>& inputs,
                      const Shape& out_shape) {
  std::vector<Tensor> outputs{Tensor(ElementType::f32, out_shape)};
  fn(node, inputs, outputs);
  return outputs[0].to_vector<float>();
}

/// One input of a node under shape inference: a model input, a constant or omitted.
struct Arg {
  enum class Kind { input, constant, omitted } kind = Kind::omitted;
  ElementType type = ElementType::f32;
  Shape shape;
  Tensor data;

  static Arg input(const Shape& shape, ElementType type = ElementType::f32) {
    return Arg{Kind::input, type, shape, {}};
  }
  static Arg constant(Tensor data) { return Arg{Kind::constant, data.element_type(), {}, data}; }
  static Arg omitted() { return Arg{}; }
};

/// Builds (and so validates) a model of a single node named `name`; returns its output values.
inline std::vector<ValueInfo> infer(const std::string& op_type, const std::vector<Arg>& args,
                                    Attributes attributes = {}, size_t num_outputs = 1,
                                    const std::string& name = "node_under_test") {
  ModelBuilder b("single_" + op_type);
  std::vector<ValueId> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string value_name = "arg" + std::to_string(i);
    switch (args[i].kind) {
      case Arg::Kind::input:
        inputs.push_back(b.input(value_name, args[i].type, args[i].shape));
        break;
      case Arg::Kind::constant:
        inputs.push_back(b.constant(value_name, args[i].data));
        break;
      case Arg::Kind::omitted:
        inputs.push_back(no_value);
        break;
    }
  }
  const std::vector<ValueId> outputs =
      b.op_multi(op_type, inputs, num_outputs, std::move(attributes), name);
  for (ValueId v : outputs) b.output(v);
  std::shared_ptr<Model> model = b.build();
  std::vector<ValueInfo> result;
  for (ValueId v : outputs) result.push_back(model->value(v));
  return result;
}

inline Shape infer_shape(const std::string& op_type, const std::vector<Arg>& args,
                         Attributes attributes = {}) {
  return infer(op_type, args, std::move(attributes)).at(0).shape;
}

/// The message of the ModelError `f` throws ("no ModelError" when it throws none).
template <class F>
std::string model_error(F&& f) {
  try {
    f();
  } catch (const ModelError& e) {
    return e.what();
  }
  return "no ModelError";
}

inline auto near(const floats& expected, float tolerance = 1e-5f) {
  return ::testing::Pointwise(::testing::FloatNear(tolerance), expected);
}

}  // namespace troupe::nn_test
