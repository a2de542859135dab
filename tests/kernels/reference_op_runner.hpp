#pragma once

// Test support for one-node models: builds a model around a single op with troupe::ModelBuilder
// (so the op's schema infers the output types and shapes), then runs the op's reference kernel on
// the given tensors and returns the outputs.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel_registry.hpp"
#include "troupe/model_builder.hpp"

namespace troupe::test {

// Short names of the element types the one-node tests build their tensors with.
inline constexpr ElementType F32 = ElementType::f32;
inline constexpr ElementType F64 = ElementType::f64;
inline constexpr ElementType I32 = ElementType::i32;
inline constexpr ElementType I64 = ElementType::i64;
inline constexpr ElementType BOOL = ElementType::boolean;

/// One input of the op under test: a model input with data, a model input with only a declared
/// type and shape (for shape-inference tests), a constant, or an omitted optional input.
struct Arg {
  enum class Kind { input, constant, omitted };
  Kind kind = Kind::input;
  Tensor data;
  ElementType type = ElementType::undefined;
  Shape shape;
};

inline Arg input(Tensor t) {
  Arg a;
  a.type = t.element_type();
  a.shape = t.shape();
  a.data = std::move(t);
  return a;
}

inline Arg declared(ElementType type, Shape shape) {
  Arg a;
  a.type = type;
  a.shape = std::move(shape);
  return a;
}

inline Arg constant(Tensor t) {
  Arg a = input(std::move(t));
  a.kind = Arg::Kind::constant;
  return a;
}

inline Arg omitted() {
  Arg a;
  a.kind = Arg::Kind::omitted;
  return a;
}

inline Tensor f32(const Shape& shape, const std::vector<float>& v) {
  return Tensor::from_vector<float>(shape, v);
}
inline Tensor f64(const Shape& shape, const std::vector<double>& v) {
  return Tensor::from_vector<double>(shape, v);
}
inline Tensor i32(const Shape& shape, const std::vector<int32_t>& v) {
  return Tensor::from_vector<int32_t>(shape, v);
}
inline Tensor i64(const Shape& shape, const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>(shape, v);
}
inline Tensor u8(const Shape& shape, const std::vector<uint8_t>& v) {
  return Tensor::from_vector<uint8_t>(shape, v);
}
inline Tensor boolean(const Shape& shape, const std::vector<bool>& v) {
  Tensor t(ElementType::boolean, shape);
  for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i];
  return t;
}
/// A 1-D i64 tensor, the usual form of shapes, axes and pads.
inline Tensor ints(const std::vector<int64_t>& v) {
  return i64(Shape{static_cast<int64_t>(v.size())}, v);
}

/// A one-node model: its inputs named in0, in1, ..., the node named "node".
inline std::shared_ptr<Model> single_op_model(const std::string& op_type,
                                              const std::vector<Arg>& args, Attributes attributes,
                                              size_t num_outputs) {
  ModelBuilder b("single_op");
  std::vector<ValueId> ids;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    switch (args[i].kind) {
      case Arg::Kind::input:
        ids.push_back(b.input(name, args[i].type, args[i].shape));
        break;
      case Arg::Kind::constant:
        ids.push_back(b.constant(name, args[i].data));
        break;
      case Arg::Kind::omitted:
        ids.push_back(no_value);
        break;
    }
  }
  for (ValueId out : b.op_multi(op_type, ids, num_outputs, std::move(attributes), "node"))
    b.output(out);
  return b.build();
}

/// The inferred output types and shapes of the op.
inline std::vector<ValueInfo> infer(const std::string& op_type, const std::vector<Arg>& args,
                                    Attributes attributes = {}, size_t num_outputs = 1) {
  auto model = single_op_model(op_type, args, std::move(attributes), num_outputs);
  std::vector<ValueInfo> out;
  for (ValueId id : model->nodes().at(0).outputs) out.push_back(model->value(id));
  return out;
}

inline Shape infer_shape(const std::string& op_type, const std::vector<Arg>& args,
                         Attributes attributes = {}) {
  return infer(op_type, args, std::move(attributes)).at(0).shape;
}

/// Infers the outputs and runs the reference kernel; outputs get the inferred types and shapes.
inline std::vector<Tensor> run(const std::string& op_type, const std::vector<Arg>& args,
                               Attributes attributes = {}, size_t num_outputs = 1) {
  auto model = single_op_model(op_type, args, std::move(attributes), num_outputs);
  const Node& node = model->nodes().at(0);
  kernels::KernelRequest request{node, {}, {}};
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    request.inputs.push_back(args[i].kind == Arg::Kind::omitted ? ValueInfo{}
                                                                : model->value(node.inputs[i]));
    inputs.push_back(args[i].data);
  }
  std::vector<Tensor> outputs;
  for (ValueId id : node.outputs) {
    request.outputs.push_back(model->value(id));
    outputs.emplace_back(model->value(id).type, model->value(id).shape);
  }
  auto kernel = kernels::KernelRegistry::instance().create_with("reference", request);
  if (!kernel) throw std::runtime_error("no reference kernel for " + op_type);
  kernel->execute(inputs, outputs);
  return outputs;
}

inline Tensor run1(const std::string& op_type, const std::vector<Arg>& args,
                   Attributes attributes = {}) {
  return run(op_type, args, std::move(attributes)).at(0);
}

/// Checks type, shape and every value (within `tolerance`, absolute).
inline void expect_tensor(const Tensor& actual, ElementType type, const Shape& shape,
                          const std::vector<double>& expected, double tolerance = 1e-6) {
  EXPECT_EQ(actual.element_type(), type) << "element type";
  ASSERT_EQ(actual.shape(), shape) << "shape " << actual.shape().to_string();
  ASSERT_EQ(actual.size(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(actual.value_at(static_cast<int64_t>(i)), expected[i], tolerance)
        << "at flat index " << i;
}

/// Expects `f` to throw E whose message contains every one of `parts`.
template <class E, class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected an exception";
  } catch (const E& e) {
    const std::string message = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos)
          << "message '" << message << "' lacks '" << part << "'";
  }
}

}  // namespace troupe::test
