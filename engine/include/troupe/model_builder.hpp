#pragma once

#include <memory>
#include <string>
#include <vector>

#include "troupe/model.hpp"

namespace troupe {

/// Builds a Model in C++:
///
///     ModelBuilder b("mlp");
///     auto x = b.input("x", ElementType::f32, {1, 16});
///     auto w = b.constant("w", Tensor::from_vector<float>({16, 4}, weights));
///     auto y = b.op("Relu", {b.op("MatMul", {x, w})});
///     b.output(y, "y");
///     std::shared_ptr<Model> model = b.build();
class ModelBuilder {
 public:
  explicit ModelBuilder(std::string model_name = "model");

  /// Declares a model input.
  ValueId input(const std::string& name, ElementType type, const Shape& shape);
  /// Declares a constant. Its memory is shared, not copied, and must not change afterwards.
  ValueId constant(const std::string& name, Tensor data);
  /// Adds a node with one output and returns that output. `name` defaults to "<op_type>_<n>".
  ValueId op(const std::string& op_type, const std::vector<ValueId>& inputs,
             Attributes attributes = {}, const std::string& name = {});
  /// Adds a node with `num_outputs` outputs and returns them.
  std::vector<ValueId> op_multi(const std::string& op_type, const std::vector<ValueId>& inputs,
                                size_t num_outputs, Attributes attributes = {},
                                const std::string& name = {});
  /// Marks a value as a model output, renaming it to `name` when given.
  void output(ValueId value, const std::string& name = {});

  /// Validates the graph (types, shapes, op attributes) and returns the model.
  std::shared_ptr<Model> build();

 private:
  std::shared_ptr<Model> model_;
  size_t counter_ = 0;
};

}  // namespace troupe
