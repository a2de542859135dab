#include "serialization/model_formats.hpp"

#include <filesystem>

#include "serialization/onnx_reader.hpp"
#include "serialization/troupe_format.hpp"
#include "troupe/error.hpp"

namespace troupe::serialization {

namespace {

struct Reader {
  const char* extension;
  std::shared_ptr<Model> (*read)(const std::string& path);
};

// Readers by extension. Each format's reader lives in its own file of this folder.
const std::vector<Reader>& readers() {
  static const std::vector<Reader> table = {{"onnx", &read_onnx_model},
                                            {"troupe", &read_troupe_model}};
  return table;
}

}  // namespace

std::vector<std::string> supported_model_formats() {
  std::vector<std::string> out;
  for (const Reader& r : readers()) out.push_back(r.extension);
  return out;
}

std::shared_ptr<Model> read_model_file(const std::string& path) {
  if (!std::filesystem::exists(path)) throw InvalidArgument("model file '" + path + "' does not exist");
  std::string ext = std::filesystem::path(path).extension().string();
  if (!ext.empty() && ext[0] == '.') ext = ext.substr(1);
  for (const Reader& r : readers())
    if (ext == r.extension) return r.read(path);
  std::string known;
  for (const auto& f : supported_model_formats()) known += (known.empty() ? "" : ", ") + f;
  throw InvalidArgument("cannot read model '" + path + "': unknown format '" + ext +
                        "' (troupe reads: " + (known.empty() ? "none yet" : known) + ")");
}

}  // namespace troupe::serialization
