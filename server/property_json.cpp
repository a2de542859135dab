#include "server/property_json.hpp"

#include "troupe/error.hpp"

namespace troupe::server {

namespace {

Any property_of_json(const std::string& key, const nlohmann::json& value,
                     const std::string& where) {
  if (value.is_boolean()) return Any(value.get<bool>());
  if (value.is_number_integer()) return Any(value.get<int64_t>());
  if (value.is_number()) return Any(value.get<double>());
  if (value.is_string()) return Any(value.get<std::string>());
  // An object (priority_queue_policy's levels) is passed on as its JSON text.
  if (value.is_object()) return Any(value.dump());
  if (value.is_array()) {
    std::vector<std::string> items;
    for (const auto& item : value)
      items.push_back(item.is_string() ? item.get<std::string>() : item.dump());
    return Any(std::move(items));
  }
  throw InvalidArgument(where + ": property '" + key +
                        "' must be a string, number, bool, list or object");
}

}  // namespace

AnyMap properties_of_json(const nlohmann::json& object, const std::string& where) {
  if (!object.is_object()) throw InvalidArgument(where + " is not a JSON object");
  AnyMap properties;
  for (const auto& [key, value] : object.items())
    properties[key] = property_of_json(key, value, where);
  return properties;
}

}  // namespace troupe::server
