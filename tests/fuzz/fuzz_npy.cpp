// libFuzzer target: NumPy .npy bytes (parse_npy: magic, version, header dict, dtype, shape, data).

#include <cstddef>
#include <cstdint>

#include "serialization/npy_format.hpp"
#include "troupe/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    troupe::Tensor tensor = troupe::serialization::parse_npy(data, size, "<fuzz input>");
    // Touch every byte, so a tensor larger than the data it was given shows under ASan.
    volatile unsigned char sum = 0;
    const auto* bytes = static_cast<const unsigned char*>(tensor.raw_data());
    for (size_t i = 0; i < tensor.byte_size(); ++i) sum += bytes[i];
  } catch (const troupe::Error&) {
    // refused with a typed error
  }
  return 0;
}
