#include "apps/bench_output_file.hpp"

#include <fstream>
#include <stdexcept>

namespace troupe::apps {

void write_output_file(const std::string& path, const std::string& kind, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + kind + " file '" + path + "'");
}

}  // namespace troupe::apps
