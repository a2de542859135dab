// libFuzzer target: an ONNX model read by path (read_onnx_model): the bytes are written to
// model.onnx in a directory that also holds a small external data file (w.bin) and has another
// file just outside it, so the reader's external data path handling (relative, "..", absolute
// locations, offsets and lengths) is reached. Then compiled and run once.

#include <cstddef>
#include <cstdint>

#include "serialization/onnx_reader.hpp"
#include "tests/fuzz/fuzz_model_runner.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = troupe::fuzz::model_dir() + "/model.onnx";
  troupe::fuzz::write_file(path, data, size);
  std::shared_ptr<troupe::Model> model;
  try {
    model = troupe::serialization::read_onnx_model(path);
  } catch (const troupe::Error&) {
    return 0;  // refused with a typed error
  }
  troupe::fuzz::compile_and_infer(*model);
  return 0;
}
