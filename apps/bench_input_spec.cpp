#include "apps/bench_input_spec.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "serialization/npy_format.hpp"
#include "troupe/error.hpp"

namespace troupe::apps {

namespace {

// "name[a,b,c],other[d,e]" or "[a,b,c]" (for the only input; key "") as the text of each item.
std::map<std::string, std::vector<std::string>> parse_named_lists(const std::string& option,
                                                                  const std::string& text) {
  std::map<std::string, std::vector<std::string>> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t open = text.find('[', pos);
    const size_t close = open == std::string::npos ? open : text.find(']', open);
    if (close == std::string::npos)
      throw InvalidArgument(option + " '" + text + "': expected name[v0,v1,...]");
    const std::string name = text.substr(pos, open - pos);
    std::vector<std::string> dims;
    const std::string list = text.substr(open + 1, close - open - 1);
    size_t p = 0;
    while (p < list.size()) {
      size_t comma = list.find(',', p);
      if (comma == std::string::npos) comma = list.size();
      dims.push_back(list.substr(p, comma - p));
      p = comma + 1;
    }
    if (dims.empty())
      throw InvalidArgument(option + " '" + text + "': empty list for '" + name + "'");
    out[name] = dims;
    pos = close + 1;
    if (pos < text.size() && text[pos] == ',') ++pos;
  }
  return out;
}

}  // namespace

ShapeSpec parse_shapes(const std::string& text) {
  ShapeSpec out;
  for (const auto& entry : parse_named_lists("-shape", text)) {
    for (const auto& item : entry.second) {
      char* end = nullptr;
      const long long d = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || d < 1)
        throw InvalidArgument("-shape '" + text + "': dimension '" + item +
                              "' is not a positive integer");
      out[entry.first].push_back(d);
    }
  }
  return out;
}

ValueSpec parse_values(const std::string& option, const std::string& text) {
  ValueSpec out;
  for (const auto& entry : parse_named_lists(option, text)) {
    for (const auto& item : entry.second) {
      char* end = nullptr;
      const float v = std::strtof(item.c_str(), &end);
      if (item.empty() || *end != '\0')
        throw InvalidArgument(option + " '" + text + "': '" + item + "' is not a number");
      out[entry.first].push_back(v);
    }
  }
  return out;
}

const std::vector<float>* values_for(const ValueSpec& values, const std::string& name,
                                     size_t input_count) {
  auto it = values.find(name);
  if (it == values.end() && input_count == 1) it = values.find("");
  return it == values.end() ? nullptr : &it->second;
}

void require_input(const std::string& option, const std::string& name, size_t input_count,
                   const std::function<bool(const std::string&)>& has_input) {
  const bool known = name.empty() ? input_count == 1 : has_input(name);
  if (!known)
    throw InvalidArgument(option + ": the model has no input '" + name + "'" +
                          (name.empty() ? " (name the input: several inputs)" : ""));
}

GivenInputs read_input_files(const std::vector<std::string>& items) {
  GivenInputs given;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    const std::string name = eq == std::string::npos ? std::string() : item.substr(0, eq);
    const std::string file = eq == std::string::npos ? item : item.substr(eq + 1);
    if (file.empty()) throw InvalidArgument("-i '" + item + "': give NAME=FILE.npy");
    if (given.count(name)) throw InvalidArgument("-i: input '" + name + "' is given twice");
    try {
      given.emplace(name, serialization::read_npy(file));
    } catch (const Error& e) {
      throw InvalidArgument("-i '" + item + "': " + e.what());
    }
  }
  return given;
}

ShapeSpec with_file_shapes(ShapeSpec shapes, const GivenInputs& given) {
  for (const auto& [name, tensor] : given) {
    const std::vector<int64_t>& dims = tensor.shape().dims();
    auto it = shapes.find(name);
    if (it != shapes.end() && it->second != dims)
      throw InvalidArgument("-i: input '" + name + "' has the shape " + tensor.shape().to_string() +
                            " in its file and " + Shape(it->second).to_string() + " in -shape");
    shapes[name] = dims;
  }
  return shapes;
}

Shape run_shape(const ValueInfo& info, const ShapeSpec& shapes, size_t input_count, int64_t batch,
                bool& had_dynamic) {
  const std::vector<int64_t>& model_dims = info.shape.dims();
  std::vector<int64_t> dims = model_dims;
  auto it = shapes.find(info.name);
  if (it == shapes.end() && input_count == 1) it = shapes.find("");
  if (it != shapes.end()) {
    if (it->second.size() != model_dims.size())
      throw InvalidArgument(fmt::format("-shape: input '{}' has rank {} {}, got {} dimensions",
                                        info.name, model_dims.size(), info.shape.to_string(),
                                        it->second.size()));
    for (size_t i = 0; i < dims.size(); ++i) {
      if (model_dims[i] >= 0 && model_dims[i] != it->second[i])
        throw InvalidArgument(fmt::format(
            "-shape: input '{}' is static in dimension {} ({} in {}), cannot run it as {}",
            info.name, i, model_dims[i], info.shape.to_string(), it->second[i]));
      dims[i] = it->second[i];
    }
  }
  if (batch > 0) {
    if (dims.empty())
      throw InvalidArgument("-b " + std::to_string(batch) + ": input '" + info.name +
                            "' is a scalar and has no batch dimension");
    if (model_dims[0] >= 0 && model_dims[0] != batch)
      throw InvalidArgument(fmt::format(
          "-b {}: input '{}' has a static batch of {} ({}); a different batch needs a model whose "
          "first dimension is dynamic",
          batch, info.name, model_dims[0], info.shape.to_string()));
    if (it != shapes.end() && it->second[0] != batch)
      throw InvalidArgument(fmt::format("-b {} contradicts -shape {} for input '{}'", batch,
                                        Shape(it->second).to_string(), info.name));
    dims[0] = batch;
  }
  for (auto& d : dims) {
    if (d < 0) {
      d = 1;
      had_dynamic = true;
    }
  }
  return Shape(dims);
}

}  // namespace troupe::apps
