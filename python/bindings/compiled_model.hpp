#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "infer_request.hpp"
#include "troupe/compiled_model.hpp"

namespace troupe::python {

/// troupe.CompiledModel: the C++ handle and the request __call__ reuses.
class CompiledModelHandle {
 public:
  explicit CompiledModelHandle(CompiledModel model) : model_(std::move(model)) {}
  /// Drops the pipeline with the GIL released (its shutdown waits for requests whose callbacks
  /// need the GIL).
  ~CompiledModelHandle();
  CompiledModelHandle(const CompiledModelHandle&) = delete;
  CompiledModelHandle& operator=(const CompiledModelHandle&) = delete;

  CompiledModel& model() { return model_; }
  /// The request behind __call__, made on first use.
  InferRequestHandle& call_request();

 private:
  CompiledModel model_;
  std::shared_ptr<InferRequestHandle> call_request_;
};

}  // namespace troupe::python
