#include "server/server_context.hpp"

namespace troupe::server {

std::vector<std::string> server_extensions() {
  return {"binary_tensor_data", "statistics", "model_repository", "metrics"};
}

}  // namespace troupe::server
