// libFuzzer target: an ONNX model from memory (read_onnx_model_from_buffer, with a directory for
// external data), then compiled and run once (tests/fuzz/fuzz_model_runner.hpp).

#include <cstddef>
#include <cstdint>

#include "serialization/onnx_reader.hpp"
#include "tests/fuzz/fuzz_model_runner.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<troupe::Model> model;
  try {
    model =
        troupe::serialization::read_onnx_model_from_buffer(data, size, troupe::fuzz::model_dir());
  } catch (const troupe::Error&) {
    return 0;  // refused with a typed error
  }
  troupe::fuzz::compile_and_infer(*model);
  return 0;
}
