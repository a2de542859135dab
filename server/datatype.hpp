#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "troupe/element_type.hpp"

namespace troupe::server {

/// The Open Inference Protocol's name of an element type ("FP32", "INT64", "BOOL", "BF16", ...).
std::string_view kserve_datatype(ElementType type);

/// The element type of a protocol datatype name; nullopt for names troupe does not support.
std::optional<ElementType> element_type_of_datatype(std::string_view datatype);

}  // namespace troupe::server
