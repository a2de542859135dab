#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "troupe/tensor.hpp"

namespace troupe {

class Model;

/// A graph held by a control-flow node (If's branches, Loop's and Scan's body). Its inputs are
/// the op's formal inputs followed by the values it reads from the enclosing graph, each named
/// as that value; the node lists those enclosing values as inputs after its formal ones.
using Subgraph = std::shared_ptr<const Model>;

/// One node attribute: an int, a float, a string, a list of those, a tensor or a subgraph.
using AttributeValue =
    std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                 std::vector<std::string>, Tensor, Subgraph>;

/// Named attributes of a node with typed accessors. Getters throw ModelError naming the attribute
/// when it is present with another type; the `_or` forms return the default when it is absent.
class Attributes {
 public:
  Attributes() = default;
  Attributes(std::initializer_list<std::pair<const std::string, AttributeValue>> init)
      : values_(init) {}

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  void set(const std::string& name, AttributeValue value) { values_[name] = std::move(value); }
  void erase(const std::string& name) { values_.erase(name); }

  int64_t get_int(const std::string& name) const;
  int64_t get_int_or(const std::string& name, int64_t fallback) const;
  double get_float(const std::string& name) const;
  double get_float_or(const std::string& name, double fallback) const;
  std::string get_string(const std::string& name) const;
  std::string get_string_or(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> get_ints(const std::string& name) const;
  std::vector<int64_t> get_ints_or(const std::string& name, std::vector<int64_t> fallback) const;
  std::vector<double> get_floats(const std::string& name) const;
  std::vector<double> get_floats_or(const std::string& name, std::vector<double> fallback) const;
  std::vector<std::string> get_strings(const std::string& name) const;
  std::vector<std::string> get_strings_or(const std::string& name,
                                          std::vector<std::string> fallback) const;
  const Tensor& get_tensor(const std::string& name) const;
  const Subgraph& get_graph(const std::string& name) const;

  const std::map<std::string, AttributeValue>& all() const { return values_; }

 private:
  const AttributeValue& at(const std::string& name) const;
  std::map<std::string, AttributeValue> values_;
};

}  // namespace troupe
