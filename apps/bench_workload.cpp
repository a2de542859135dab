#include "apps/bench_workload.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "apps/bench_input_spec.hpp"
#include "apps/default_model.hpp"
#include "troupe/error.hpp"
#include "troupe/tensor.hpp"

namespace troupe::apps {

namespace {

// Inputs for a model read from a file: deterministic values in [0, 1) (or small integers; as
// decimal text for a string input).
Tensor make_input(const ValueInfo& info, const Shape& shape, uint32_t seed) {
  const bool integral = info.type != ElementType::f32 && info.type != ElementType::f16 &&
                        info.type != ElementType::bf16 && info.type != ElementType::f64;
  std::vector<float> values(static_cast<size_t>(shape.element_count()));
  uint32_t state = seed * 2654435761u + 1;
  for (auto& v : values) {
    state = state * 1664525u + 1013904223u;
    const float u = static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
    v = integral ? std::floor(u * 10.0f) : u;
  }
  Tensor f32 = Tensor::from_vector<float>(shape, values);
  if (info.type == ElementType::f32) return f32;
  if (info.type == ElementType::string) {  // the same values, as decimal text
    Tensor text(ElementType::string, shape);
    for (size_t i = 0; i < values.size(); ++i)
      text.data<std::string>()[i] = std::to_string(values[i]);
    return text;
  }
  if (is_convertible(ElementType::f32, info.type)) return f32.convert(info.type);
  // Integers take the small values themselves (Tensor::convert turns no float into an integer).
  std::vector<int64_t> integers(values.begin(), values.end());
  if (info.type == ElementType::boolean) {
    Tensor flags(info.type, shape);
    for (size_t i = 0; i < integers.size(); ++i) flags.data<bool>()[i] = integers[i] != 0;
    return flags;
  }
  const Tensor i64 = Tensor::from_vector<int64_t>(shape, integers);
  if (is_convertible(ElementType::i64, info.type)) return i64.convert(info.type);
  return Tensor(info.type, shape);  // zeros
}

}  // namespace

Workload make_workload(BenchModel& model, const BenchOptions& o) {
  CompiledModel& compiled = model.compiled;
  const std::vector<ValueInfo>& inputs = compiled.inputs();
  auto has_input = [&](const std::string& name) {
    return std::any_of(inputs.begin(), inputs.end(),
                       [&](const ValueInfo& in) { return in.name == name; });
  };
  for (const auto& entry : parse_shapes(o.shape))
    require_input("-shape", entry.first, inputs.size(), has_input);
  GivenInputs given = read_input_files(o.input_files);
  for (const auto& entry : given) require_input("-i", entry.first, inputs.size(), has_input);
  // The only input given without its name: keyed by it from here on.
  if (given.count("") && inputs.size() == 1) {
    Tensor only = given.at("");
    given.erase("");
    given.emplace(inputs[0].name, std::move(only));
  }
  for (const auto& in : inputs) {
    auto it = given.find(in.name);
    if (it == given.end() || it->second.element_type() == in.type) continue;
    if (!is_convertible(it->second.element_type(), in.type))
      throw InvalidArgument("-i: input '" + in.name + "' is " + std::string(to_string(in.type)) +
                            ", its file holds " +
                            std::string(to_string(it->second.element_type())));
    it->second = it->second.convert(in.type);
  }
  const ShapeSpec shape_spec = with_file_shapes(parse_shapes(o.shape), given);

  Workload w;
  for (const auto& in : inputs)
    w.input_shapes.push_back(run_shape(in, shape_spec, inputs.size(), o.batch, w.had_dynamic));
  // benchmark_app counts every batch element: the first dimension, where every input has the
  // same one (a batch of samples). Inputs that disagree have none (a graph network's node
  // features [2000, 128] beside its edges [2, 10000], a decoder's token beside its cache): each
  // request then counts once, as the peer counts it.
  const auto& shapes = w.input_shapes;
  w.batch = 1;
  if (!shapes.empty() && shapes[0].rank() > 0 &&
      std::all_of(shapes.begin(), shapes.end(), [&](const Shape& s) {
        return s.rank() > 0 && s.dims()[0] == shapes[0].dims()[0];
      }))
    w.batch = shapes[0].dims()[0];

  const int nireq = o.nireq > 0 ? o.nireq : model.optimal_requests;
  for (int i = 0; i < nireq; ++i) {
    InferRequest r = compiled.create_infer_request();
    for (size_t k = 0; k < inputs.size(); ++k) {
      const auto& in = inputs[k];
      if (auto file = given.find(in.name); file != given.end())
        r.set_tensor(in.name, file->second.clone());
      else if (o.model_path.empty() && in.type == ElementType::f32)
        r.set_tensor(in.name,
                     make_default_input(1, default_model_seed + 1 + static_cast<uint32_t>(i)));
      else
        r.set_tensor(in.name, make_input(in, shapes[k], static_cast<uint32_t>(i)));
    }
    w.requests.push_back(std::move(r));
  }
  return w;
}

}  // namespace troupe::apps
