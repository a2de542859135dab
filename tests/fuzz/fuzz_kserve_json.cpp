// libFuzzer target: a KServe v2 JSON infer request body (decode_infer_request without the binary
// extension), with the server's default limits.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "server/http/kserve_json.hpp"
#include "server/serve_error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const troupe::server::ServerLimits limits;
  try {
    troupe::server::decode_infer_request(
        std::string_view(reinterpret_cast<const char*>(data), size), std::nullopt, limits);
  } catch (const troupe::server::ServeError&) {
    // refused: the server answers 400 naming the field
  }
  return 0;
}
