// libFuzzer target: a KServe v2 infer request with binary tensor data (decode_infer_request with
// an Inference-Header-Content-Length). Input layout: 8 bytes little-endian, the header length as
// the HTTP header would give it (any value, also beyond the body), then the body: the JSON header
// followed by the inputs' binary data.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "server/http/kserve_json.hpp"
#include "server/serve_error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const troupe::server::ServerLimits limits;
  if (size < 8) return 0;
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = header_length << 8 | data[i];
  try {
    troupe::server::decode_infer_request(
        std::string_view(reinterpret_cast<const char*>(data) + 8, size - 8),
        static_cast<size_t>(header_length), limits);
  } catch (const troupe::server::ServeError&) {
    // refused: the server answers 400 naming the field
  }
  return 0;
}
