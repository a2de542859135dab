#include "apps/perf_inputs.hpp"

#include <cstdint>
#include <map>
#include <random>

#include <fmt/format.h>

#include "apps/perf_error.hpp"
#include "serialization/npy_format.hpp"
#include "server/datatype.hpp"

namespace troupe::apps {

namespace {

ElementType element_type_of(const TensorSpec& spec) {
  const auto type = server::element_type_of_datatype(spec.datatype);
  if (!type)
    throw PerfError("input '" + spec.name + "' has datatype " + spec.datatype +
                    ", which troupe perf cannot generate or send");
  return *type;
}

Tensor random_tensor(ElementType type, const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  if (type == ElementType::boolean) {
    Tensor t(type, shape);
    auto* bytes = static_cast<uint8_t*>(t.raw_data());
    for (int64_t i = 0; i < t.size(); ++i) bytes[i] = static_cast<uint8_t>(rng() & 1u);
    return t;
  }
  if (is_floating(type)) {
    Tensor t(ElementType::f32, shape);
    std::uniform_real_distribution<float> dist(0.f, 1.f);
    for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = dist(rng);
    return type == ElementType::f32 ? t : t.convert(type);
  }
  // Small integers: valid as indices into embeddings, gathers and one-hot depths.
  Tensor t(ElementType::i64, shape);
  std::uniform_int_distribution<int64_t> dist(0, 9);
  for (int64_t i = 0; i < t.size(); ++i) t.data<int64_t>()[i] = dist(rng);
  return type == ElementType::i64 ? t : t.convert(type);
}

Tensor tensor_from_file(const TensorSpec& spec, ElementType type, const std::string& path) {
  Tensor t;
  try {
    t = serialization::read_npy(path);
  } catch (const std::exception& e) {
    throw PerfError("input '" + spec.name + "': " + e.what());
  }
  if (!Shape(spec.shape).accepts(t.shape()))
    throw PerfError("input '" + spec.name + "': " + path + " has shape " + t.shape().to_string() +
                    ", the model takes " + Shape(spec.shape).to_string());
  if (t.element_type() == type) return t;
  if (!is_convertible(t.element_type(), type))
    throw PerfError("input '" + spec.name + "': " + path + " holds " +
                    std::string(to_string(t.element_type())) + ", which does not convert to " +
                    spec.datatype);
  return t.convert(type);
}

// NAME -> FILE from the --input values.
std::map<std::string, std::string> files_by_name(const std::vector<TensorSpec>& specs,
                                                 const std::vector<std::string>& files) {
  std::string names;
  for (const auto& s : specs) names += (names.empty() ? "" : ", ") + s.name;
  std::map<std::string, std::string> by_name;
  for (const std::string& f : files) {
    const size_t eq = f.find('=');
    std::string name = eq == std::string::npos ? "" : f.substr(0, eq);
    const std::string path = eq == std::string::npos ? f : f.substr(eq + 1);
    if (name.empty()) {
      if (specs.size() != 1)
        throw PerfError("--input " + f + ": name the input (NAME=FILE); the model's are " + names);
      name = specs[0].name;
    }
    bool known = false;
    for (const auto& s : specs) known = known || s.name == name;
    if (!known)
      throw PerfError("--input " + f + ": the model has no input '" + name +
                      "' (its inputs: " + names + ")");
    by_name[name] = path;
  }
  return by_name;
}

}  // namespace

std::vector<InputData> make_inputs(const std::vector<TensorSpec>& specs,
                                   const std::vector<std::string>& files) {
  const auto by_name = files_by_name(specs, files);
  std::vector<InputData> inputs;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& spec = specs[i];
    const ElementType type = element_type_of(spec);
    const auto file = by_name.find(spec.name);
    InputData in{spec, {}, {}};
    if (file != by_name.end()) {
      in.tensor = tensor_from_file(spec, type, file->second);
      in.file = file->second;
    } else {
      std::vector<int64_t> dims = spec.shape;
      for (int64_t& d : dims)
        if (d < 0) d = 1;
      in.tensor = random_tensor(type, Shape(dims), 20240601u + static_cast<uint32_t>(i));
    }
    in.spec.shape = in.tensor.shape().dims();
    inputs.push_back(std::move(in));
  }
  return inputs;
}

nlohmann::json json_data(const InputData& input) {
  const Tensor& t = input.tensor;
  const ElementType type = t.element_type();
  nlohmann::json data = nlohmann::json::array();
  data.get_ref<nlohmann::json::array_t&>().reserve(static_cast<size_t>(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) {
    const double v = t.value_at(i);
    if (type == ElementType::boolean)
      data.push_back(v != 0);
    else if (is_integral(type))
      data.push_back(static_cast<int64_t>(v));
    else if (type == ElementType::f64)
      data.push_back(v);
    else
      // The float's shortest decimal: a double holding it prints with all 17 digits, a longer
      // body for the server to parse than a client in another language would send.
      data.push_back(std::stod(fmt::format("{}", static_cast<float>(v))));
  }
  return data;
}

}  // namespace troupe::apps
