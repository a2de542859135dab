#include "troupe/attributes.hpp"

#include "troupe/error.hpp"

namespace troupe {

namespace {
template <class T>
const T& expect(const AttributeValue& v, const std::string& name, const char* wanted) {
  if (const T* p = std::get_if<T>(&v)) return *p;
  throw ModelError("attribute '" + name + "' is not " + wanted);
}
}  // namespace

const AttributeValue& Attributes::at(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw ModelError("missing attribute '" + name + "'");
  return it->second;
}

int64_t Attributes::get_int(const std::string& name) const {
  return expect<int64_t>(at(name), name, "an integer");
}
int64_t Attributes::get_int_or(const std::string& name, int64_t fallback) const {
  return has(name) ? get_int(name) : fallback;
}
double Attributes::get_float(const std::string& name) const {
  const AttributeValue& v = at(name);
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return expect<double>(v, name, "a float");
}
double Attributes::get_float_or(const std::string& name, double fallback) const {
  return has(name) ? get_float(name) : fallback;
}
std::string Attributes::get_string(const std::string& name) const {
  return expect<std::string>(at(name), name, "a string");
}
std::string Attributes::get_string_or(const std::string& name, const std::string& fallback) const {
  return has(name) ? get_string(name) : fallback;
}
std::vector<int64_t> Attributes::get_ints(const std::string& name) const {
  const AttributeValue& v = at(name);
  if (const auto* i = std::get_if<int64_t>(&v)) return {*i};
  return expect<std::vector<int64_t>>(v, name, "a list of integers");
}
std::vector<int64_t> Attributes::get_ints_or(const std::string& name,
                                             std::vector<int64_t> fallback) const {
  return has(name) ? get_ints(name) : fallback;
}
std::vector<double> Attributes::get_floats(const std::string& name) const {
  const AttributeValue& v = at(name);
  if (const auto* i = std::get_if<std::vector<int64_t>>(&v))
    return std::vector<double>(i->begin(), i->end());
  return expect<std::vector<double>>(v, name, "a list of floats");
}
std::vector<double> Attributes::get_floats_or(const std::string& name,
                                              std::vector<double> fallback) const {
  return has(name) ? get_floats(name) : fallback;
}
std::vector<std::string> Attributes::get_strings(const std::string& name) const {
  return expect<std::vector<std::string>>(at(name), name, "a list of strings");
}
std::vector<std::string> Attributes::get_strings_or(const std::string& name,
                                                    std::vector<std::string> fallback) const {
  return has(name) ? get_strings(name) : fallback;
}
const Tensor& Attributes::get_tensor(const std::string& name) const {
  return expect<Tensor>(at(name), name, "a tensor");
}

const Subgraph& Attributes::get_graph(const std::string& name) const {
  const Subgraph& g = expect<Subgraph>(at(name), name, "a graph");
  if (!g) throw ModelError("attribute '" + name + "' holds no graph");
  return g;
}

}  // namespace troupe
