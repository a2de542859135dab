#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "troupe/any.hpp"

namespace troupe::server {

/// A JSON object of compile properties (a served model's config.json, `troupe bench
/// --load_config`) as properties: booleans, integers, numbers, strings, and lists (their items as
/// strings). Throws InvalidArgument naming `where` and the key of a value of another kind.
AnyMap properties_of_json(const nlohmann::json& object, const std::string& where);

}  // namespace troupe::server
