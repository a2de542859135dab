#pragma once

#include <memory>
#include <string>

#include "troupe/model.hpp"

namespace troupe {

/// Writes `model` in troupe's own format (conventionally a `.troupe` file), which Core::read_model
/// reads back: the graph as a protobuf message followed by the weights as raw, 64-byte-aligned
/// segments, so models over 2 GB work and reading maps the weights instead of copying them. The
/// file appears atomically (written to a temporary file, then renamed). Throws InvalidArgument
/// naming the path when it cannot be written.
void save_model(const std::shared_ptr<const Model>& model, const std::string& path);

}  // namespace troupe
