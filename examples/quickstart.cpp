// The README's example: build a two-node model in C++, compile it for the CPU and run one request.
// Expected output: y = 4 0

#include <iostream>
#include <vector>

#include "troupe/core.hpp"
#include "troupe/model_builder.hpp"

int main() {
  troupe::ModelBuilder b("mlp");  // or: core.read_model("model.onnx")
  auto x = b.input("x", troupe::ElementType::f32, {1, 4});
  auto w = b.constant("w", troupe::Tensor::from_vector<float>({4, 2}, {1, 0, 0, 1, 1, 0, 0, 1}));
  b.output(b.op("Relu", {b.op("MatMul", {x, w})}), "y");

  troupe::Core core;
  troupe::CompiledModel compiled = core.compile_model(b.build(), "CPU");
  troupe::InferRequest request = compiled.create_infer_request();
  request.set_tensor("x", troupe::Tensor::from_vector<float>({1, 4}, {1, -2, 3, -4}));
  request.infer();  // or start_async() + wait() / set_callback()
  std::vector<float> y = request.get_tensor("y").to_vector<float>();  // {4, 0}

  std::cout << "y =";
  for (float v : y) std::cout << ' ' << v;
  std::cout << '\n';
  return 0;
}
