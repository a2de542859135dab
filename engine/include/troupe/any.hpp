#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace troupe {

/// A property value: bool, integer, float, string or list of strings. Conversions are lenient the
/// way configuration files need them ("4" reads as 4, "YES"/"NO"/"true"/"false" as bool) and
/// throw InvalidArgument when a value cannot be read as the requested type.
class Any {
 public:
  using Storage =
      std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<std::string>>;

  Any() = default;
  Any(bool v) : v_(v) {}
  Any(int v) : v_(static_cast<int64_t>(v)) {}
  Any(unsigned v) : v_(static_cast<int64_t>(v)) {}
  Any(int64_t v) : v_(v) {}
  Any(uint64_t v) : v_(static_cast<int64_t>(v)) {}
  Any(double v) : v_(v) {}
  Any(const char* v) : v_(std::string(v)) {}
  Any(std::string v) : v_(std::move(v)) {}
  Any(std::vector<std::string> v) : v_(std::move(v)) {}

  bool empty() const { return v_.index() == 0; }
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;
  /// Any value as text; lists are space-separated.
  std::string as_string() const;
  std::vector<std::string> as_strings() const;
  const Storage& storage() const { return v_; }

  friend bool operator==(const Any& a, const Any& b) { return a.v_ == b.v_; }

 private:
  Storage v_;
};

/// Properties by name.
using AnyMap = std::map<std::string, Any>;

}  // namespace troupe
