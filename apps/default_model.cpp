#include "apps/default_model.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "troupe/model_builder.hpp"

namespace troupe::apps {

namespace {

using ints = std::vector<int64_t>;

// splitmix64: tiny, portable and fully specified, unlike std:: distributions whose output differs
// between standard libraries. The same seed gives the same weights everywhere.
class Generator {
 public:
  explicit Generator(uint64_t seed) : state_(seed) {}

  // Uniform in [0, 1), 24 bits of mantissa.
  float uniform() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) / static_cast<float>(1u << 24);
  }
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }

  std::vector<float> fill(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (auto& x : v) x = uniform(lo, hi);
    return v;
  }

 private:
  uint64_t state_;
};

size_t elements(const Shape& shape) {
  return static_cast<size_t>(shape.element_count());
}

// He-uniform weights keep activations at a similar scale through the Relu layers, so the softmax
// output is neither one-hot nor flat.
Tensor he_weights(Generator& gen, const Shape& shape, int64_t fan_in) {
  const float bound = std::sqrt(6.0f / static_cast<float>(fan_in));
  return Tensor::from_vector<float>(shape, gen.fill(elements(shape), -bound, bound));
}

Tensor small_values(Generator& gen, const Shape& shape, float lo, float hi) {
  return Tensor::from_vector<float>(shape, gen.fill(elements(shape), lo, hi));
}

}  // namespace

std::shared_ptr<Model> make_default_model(int64_t batch, uint32_t seed) {
  Generator gen(seed);
  ModelBuilder b("troupe_default_cnn");
  auto x = b.input(default_model_input, ElementType::f32, {batch, 3, 32, 32});

  auto w1 = b.constant("conv1.weight", he_weights(gen, {16, 3, 3, 3}, 3 * 3 * 3));
  auto b1 = b.constant("conv1.bias", small_values(gen, {16}, -0.1f, 0.1f));
  auto y = b.op("Conv", {x, w1, b1}, {{"pads", ints{1, 1, 1, 1}}}, "conv1");
  y = b.op("Relu", {y}, {}, "relu1");
  y = b.op("MaxPool", {y}, {{"kernel_shape", ints{2, 2}}, {"strides", ints{2, 2}}}, "pool1");

  auto w2 = b.constant("conv2.weight", he_weights(gen, {32, 16, 3, 3}, 16 * 3 * 3));
  auto b2 = b.constant("conv2.bias", small_values(gen, {32}, -0.1f, 0.1f));
  y = b.op("Conv", {y, w2, b2}, {{"pads", ints{1, 1, 1, 1}}}, "conv2");
  auto scale = b.constant("bn2.scale", small_values(gen, {32}, 0.8f, 1.2f));
  auto shift = b.constant("bn2.bias", small_values(gen, {32}, -0.1f, 0.1f));
  auto mean = b.constant("bn2.mean", small_values(gen, {32}, -0.2f, 0.2f));
  auto var = b.constant("bn2.var", small_values(gen, {32}, 0.5f, 1.5f));
  y = b.op("BatchNormalization", {y, scale, shift, mean, var}, {{"epsilon", 1e-5}}, "bn2");
  y = b.op("Relu", {y}, {}, "relu2");

  y = b.op("GlobalAveragePool", {y}, {}, "gap");
  y = b.op("Flatten", {y}, {{"axis", int64_t{1}}}, "flatten");
  auto wf = b.constant("fc.weight", he_weights(gen, {10, 32}, 32));
  auto bf = b.constant("fc.bias", small_values(gen, {10}, -0.1f, 0.1f));
  y = b.op("Gemm", {y, wf, bf}, {{"transB", int64_t{1}}}, "fc");
  y = b.op("Softmax", {y}, {{"axis", int64_t{1}}}, "softmax");
  b.output(y, default_model_output);
  return b.build();
}

Tensor make_default_input(int64_t batch, uint32_t seed) {
  Generator gen(seed);
  const Shape shape{batch, 3, 32, 32};
  return Tensor::from_vector<float>(shape, gen.fill(elements(shape), 0.0f, 1.0f));
}

}  // namespace troupe::apps
