// libFuzzer target: a compiled blob imported with Core::import_model (envelope, header, checksums,
// payload graph, kernel choices, weights), then run once. Most mutations fail the checksums; the
// seeds include blobs whose checksums the fuzzer must keep intact, and
// test_compiled_blob.cpp's FuzzPayloadBehindAValidChecksum covers resealed payloads.

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "tests/fuzz/fuzz_model_runner.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    troupe::CompiledModel compiled = troupe::fuzz::fuzz_core().import_model(in, "CPU");
    troupe::fuzz::infer_once(compiled);
  } catch (const troupe::Error&) {
    // refused with a typed error
  }
  return 0;
}
