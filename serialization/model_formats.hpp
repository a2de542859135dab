#pragma once

#include <memory>
#include <string>
#include <vector>

#include "troupe/model.hpp"

namespace troupe::serialization {

/// Reads a model file, choosing the reader by the file's extension. Throws InvalidArgument naming
/// the path and the formats troupe knows when none fits, and the reader's FormatError otherwise.
std::shared_ptr<Model> read_model_file(const std::string& path);

/// The extensions read_model_file understands, e.g. {"onnx"}.
std::vector<std::string> supported_model_formats();

}  // namespace troupe::serialization
