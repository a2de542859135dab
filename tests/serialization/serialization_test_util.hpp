#pragma once

// Helpers of the .troupe format, compiled blob and model cache tests.

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "troupe/compiled_model.hpp"
#include "troupe/error.hpp"
#include "troupe/model_builder.hpp"

#include "../test_util.hpp"

namespace troupe::test {

/// A fresh directory under the system's temp directory, removed with everything in it.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("troupe_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::vector<float> seeded_floats(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

/// x f32 [1,3,8,8] -> Conv 3->4 3x3 pad 1 (+bias) -> Relu -> MaxPool 2x2 -> Flatten -> Gemm 64->10
/// (+bias) -> Softmax -> y f32 [1,10]. Weights from `seed`.
inline std::shared_ptr<Model> make_small_cnn(uint32_t seed = 7) {
  ModelBuilder b("small_cnn");
  auto x = b.input("x", ElementType::f32, {1, 3, 8, 8});
  auto w = b.constant("conv_w", Tensor::from_vector<float>({4, 3, 3, 3}, seeded_floats(108, seed)));
  auto bias = b.constant("conv_b", Tensor::from_vector<float>({4}, seeded_floats(4, seed + 1)));
  auto conv = b.op("Conv", {x, w, bias},
                   {{"kernel_shape", std::vector<int64_t>{3, 3}},
                    {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                    {"strides", std::vector<int64_t>{1, 1}}},
                   "conv");
  auto relu = b.op("Relu", {conv}, {}, "relu");
  auto pool =
      b.op("MaxPool", {relu},
           {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}},
           "pool");
  auto flat = b.op("Flatten", {pool}, {{"axis", int64_t{1}}}, "flatten");
  auto fc_w =
      b.constant("fc_w", Tensor::from_vector<float>({64, 10}, seeded_floats(640, seed + 2)));
  auto fc_b = b.constant("fc_b", Tensor::from_vector<float>({10}, seeded_floats(10, seed + 3)));
  auto fc = b.op("Gemm", {flat, fc_w, fc_b}, {}, "fc");
  auto y = b.op("Softmax", {fc}, {{"axis", int64_t{1}}}, "softmax");
  b.output(y, "y");
  return b.build();
}

inline Tensor small_cnn_input(uint32_t seed = 11) {
  return Tensor::from_vector<float>({1, 3, 8, 8}, seeded_floats(192, seed, 0.f, 1.f));
}

/// Runs one request with `input` as input 0 and returns output 0.
inline std::vector<float> run_once(CompiledModel& compiled, const Tensor& input) {
  auto request = compiled.create_infer_request();
  request.set_input_tensor(0, input);
  request.infer();
  return request.get_output_tensor(0).to_vector<float>();
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace troupe::test
