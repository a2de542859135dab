#pragma once

// Helpers shared by the engine and actor tests.

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_isa.hpp"
#include "troupe/compiled_model.hpp"
#include "troupe/model_builder.hpp"

namespace troupe::test {

/// y = relu(x + bias) over f32 [batch, width], bias = 0.5 everywhere: every output is known in
/// closed form, so each request can check that it got its own result.
inline std::shared_ptr<Model> make_add_relu_model(int64_t batch = 1, int64_t width = 16) {
  ModelBuilder b("add_relu");
  auto x = b.input("x", ElementType::f32, {batch, width});
  auto bias = b.constant(
      "bias",
      Tensor::from_vector<float>({1, width}, std::vector<float>(static_cast<size_t>(width), 0.5f)));
  auto y = b.op("Relu", {b.op("Add", {x, bias}, {}, "add")}, {}, "relu");
  b.output(y, "y");
  return b.build();
}

inline float expected_add_relu(float x) {
  return x + 0.5f > 0.f ? x + 0.5f : 0.f;
}

/// f32 values drawn uniformly from [low, high) with a fixed seed.
inline Tensor random_tensor(const Shape& shape, unsigned seed, float low = -1.f, float high = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> values(static_cast<size_t>(shape.element_count()));
  for (float& v : values) v = dist(rng);
  return Tensor::from_vector<float>(shape, values);
}

/// Starts `count` requests on `compiled` at once, request i with input "x" = input(i), and
/// returns each one's output "y", in request order, once all have finished.
inline std::vector<std::vector<float>> run_in_flight(CompiledModel& compiled, int count,
                                                     const std::function<Tensor(int)>& input) {
  std::vector<InferRequest> requests;
  for (int i = 0; i < count; ++i) {
    requests.push_back(compiled.create_infer_request());
    requests.back().set_tensor("x", input(i));
    requests.back().start_async();
  }
  std::vector<std::vector<float>> outputs;
  for (InferRequest& r : requests) {
    r.wait();
    outputs.push_back(r.get_tensor("y").to_vector<float>());
  }
  return outputs;
}

/// Sets an environment variable for the lifetime of the object (and unsets it after). Only for
/// variables troupe reads when a model is compiled, set while no model is being compiled.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

/// Whether the effective ISA (the CPU's, capped by ONEDNN_MAX_CPU_ISA) has AVX-512 (avx512_core in
/// oneDNN's terms): where oneDNN 2.6 has channels-last (brgemm) convolutions and runs bf16,
/// natively or in emulation.
inline bool cpu_has_avx512() {
  return kernels::effective_cpu_isa().avx512;
}

/// The effective ISA's name, for skip messages.
inline std::string effective_isa_name() {
  return kernels::effective_cpu_isa().name;
}

/// The message of the E that f() throws; a test failure (and "") when it throws something else
/// or nothing.
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw another exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "did not throw";
  return {};
}

}  // namespace troupe::test
