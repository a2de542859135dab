// libFuzzer target: a .troupe model file (read_troupe_model, which maps the file), then compiled
// and run once.

#include <cstddef>
#include <cstdint>

#include "serialization/troupe_format.hpp"
#include "tests/fuzz/fuzz_model_runner.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = troupe::fuzz::model_dir() + "/model.troupe";
  troupe::fuzz::write_file(path, data, size);
  std::shared_ptr<troupe::Model> model;
  try {
    model = troupe::serialization::read_troupe_model(path);
  } catch (const troupe::Error&) {
    return 0;  // refused with a typed error
  }
  troupe::fuzz::compile_and_infer(*model);
  return 0;
}
