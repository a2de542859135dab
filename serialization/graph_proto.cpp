#include "serialization/graph_proto.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "serialization/byte_io.hpp"
#include "serialization/message_text.hpp"
#include "troupe/error.hpp"

namespace troupe::serialization {

namespace {

// Bytes of a dense tensor of `type` and `dims`, or throws when a dim is negative or the size does
// not fit in 63 bits (a corrupt file must not make us allocate or index out of range).
uint64_t checked_byte_size(ElementType type, const std::vector<int64_t>& dims,
                           const std::string& where) {
  const uint64_t limit = std::numeric_limits<int64_t>::max() / 16;
  uint64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0)
      throw FormatError(where + ": tensor dimension " + std::to_string(d) + " is negative");
    if (d != 0 && count > limit / static_cast<uint64_t>(d))
      throw FormatError(where + ": tensor of shape " + Shape(dims).to_string() + " is too large");
    count *= static_cast<uint64_t>(d);
  }
  return count * element_size(type);
}

Tensor tensor_from_proto(const proto::Tensor& t, const WeightsView& weights,
                         const std::string& where) {
  const ElementType type = serialization::from_proto(t.type(), where);
  if (type == ElementType::undefined)
    throw FormatError(where + ": tensor has undefined element type");
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  const uint64_t bytes = checked_byte_size(type, dims, where);
  if (type == ElementType::string) {
    if (bytes / sizeof(std::string) != static_cast<uint64_t>(t.strings_size()))
      throw FormatError(where + ": string tensor " + Shape(dims).to_string() + " holds " +
                        std::to_string(t.strings_size()) + " strings");
    Tensor strings(type, Shape(dims));
    std::copy(t.strings().begin(), t.strings().end(), strings.data<std::string>());
    return strings;
  }
  const uint64_t offset = t.data().offset();
  const uint64_t length = t.data().length();
  if (length != bytes)
    throw FormatError(where + ": tensor " + std::string(to_string(type)) + Shape(dims).to_string() +
                      " needs " + std::to_string(bytes) + " bytes, its segment holds " +
                      std::to_string(length));
  if (offset > weights.size || length > weights.size - offset)
    throw FormatError(where + ": segment [" + std::to_string(offset) + ", +" +
                      std::to_string(length) + ") lies outside the weights section of " +
                      std::to_string(weights.size) + " bytes");
  const unsigned char* src = weights.data + offset;
  const Shape shape(dims);
  // Aligned segments are used in place (no copy of a memory-mapped file); `owner` keeps them alive.
  if (weights.owner && reinterpret_cast<uintptr_t>(src) % weight_alignment == 0)
    return Tensor(type, shape, weights.owner, const_cast<unsigned char*>(src));
  Tensor copy(type, shape);
  if (length > 0) std::memcpy(copy.raw_data(), src, length);
  return copy;
}

}  // namespace

// ---- element types ------------------------------------------------------------------------------

proto::ElementType to_proto(ElementType type) {
  switch (type) {
    case ElementType::undefined:
      return proto::UNDEFINED;
    case ElementType::f32:
      return proto::F32;
    case ElementType::f16:
      return proto::F16;
    case ElementType::bf16:
      return proto::BF16;
    case ElementType::f64:
      return proto::F64;
    case ElementType::i8:
      return proto::I8;
    case ElementType::u8:
      return proto::U8;
    case ElementType::i32:
      return proto::I32;
    case ElementType::i64:
      return proto::I64;
    case ElementType::boolean:
      return proto::BOOLEAN;
    case ElementType::i16:
      return proto::I16;
    case ElementType::u16:
      return proto::U16;
    case ElementType::u32:
      return proto::U32;
    case ElementType::u64:
      return proto::U64;
    case ElementType::string:
      return proto::STRING;
  }
  throw InvalidArgument("element type " + std::to_string(static_cast<int>(type)) +
                        " has no serialized form");
}

ElementType from_proto(int type, const std::string& where) {
  switch (type) {
    case proto::UNDEFINED:
      return ElementType::undefined;
    case proto::F32:
      return ElementType::f32;
    case proto::F16:
      return ElementType::f16;
    case proto::BF16:
      return ElementType::bf16;
    case proto::F64:
      return ElementType::f64;
    case proto::I8:
      return ElementType::i8;
    case proto::U8:
      return ElementType::u8;
    case proto::I32:
      return ElementType::i32;
    case proto::I64:
      return ElementType::i64;
    case proto::BOOLEAN:
      return ElementType::boolean;
    case proto::I16:
      return ElementType::i16;
    case proto::U16:
      return ElementType::u16;
    case proto::U32:
      return ElementType::u32;
    case proto::U64:
      return ElementType::u64;
    case proto::STRING:
      return ElementType::string;
    default:
      break;
  }
  throw FormatError(where + ": unknown element type code " + std::to_string(type));
}

// ---- writing ------------------------------------------------------------------------------------

void WeightsWriter::add(const Tensor& tensor, proto::Tensor& out) {
  Tensor dense = tensor.contiguous();
  out.set_type(to_proto(dense.element_type()));
  for (int64_t d : dense.shape()) out.add_dims(d);
  if (dense.element_type() == ElementType::string) {
    const std::string* s = dense.data<std::string>();
    for (int64_t i = 0; i < dense.size(); ++i) out.add_strings(s[i]);
    return;
  }
  const uint64_t bytes = dense.byte_size();
  const auto key = std::make_pair(static_cast<const void*>(dense.raw_data()), bytes);
  auto it = offset_by_memory_.find(key);
  uint64_t offset;
  if (it != offset_by_memory_.end() && bytes > 0) {
    offset = it->second;
  } else {
    offset = size_;
    size_ = align_up(size_ + bytes, weight_alignment);
    offset_by_memory_[key] = offset;
    entries_.push_back({dense, offset});
  }
  out.mutable_data()->set_offset(offset);
  out.mutable_data()->set_length(bytes);
}

void WeightsWriter::write(std::ostream& out) const {
  static const char zeros[weight_alignment] = {};
  uint64_t position = 0;
  for (const Entry& e : entries_) {
    // Entries were appended in offset order, so only padding lies between them.
    while (position < e.offset) {
      const uint64_t n = std::min<uint64_t>(e.offset - position, weight_alignment);
      out.write(zeros, static_cast<std::streamsize>(n));
      position += n;
    }
    const uint64_t bytes = e.tensor.byte_size();
    out.write(static_cast<const char*>(e.tensor.raw_data()), static_cast<std::streamsize>(bytes));
    position += bytes;
  }
  while (position < size_) {
    const uint64_t n = std::min<uint64_t>(size_ - position, weight_alignment);
    out.write(zeros, static_cast<std::streamsize>(n));
    position += n;
  }
}

void to_proto(const Attributes& attributes,
              google::protobuf::RepeatedPtrField<proto::Attribute>& out, WeightsWriter& weights) {
  for (const auto& [name, value] : attributes.all()) {
    proto::Attribute& a = *out.Add();
    a.set_name(name);
    if (const auto* i = std::get_if<int64_t>(&value)) {
      a.set_i(*i);
    } else if (const auto* f = std::get_if<double>(&value)) {
      a.set_f(*f);
    } else if (const auto* s = std::get_if<std::string>(&value)) {
      a.set_s(*s);
    } else if (const auto* is = std::get_if<std::vector<int64_t>>(&value)) {
      auto* list = a.mutable_ints();
      for (int64_t v : *is) list->add_values(v);
    } else if (const auto* fs = std::get_if<std::vector<double>>(&value)) {
      auto* list = a.mutable_floats();
      for (double v : *fs) list->add_values(v);
    } else if (const auto* ss = std::get_if<std::vector<std::string>>(&value)) {
      auto* list = a.mutable_strings();
      for (const auto& v : *ss) list->add_values(v);
    } else if (const auto* t = std::get_if<Tensor>(&value)) {
      if (t->empty()) throw InvalidArgument("attribute " + quoted(name) + " holds an empty tensor");
      weights.add(*t, *a.mutable_tensor());
    } else if (const auto* g = std::get_if<Subgraph>(&value)) {
      if (!*g) throw InvalidArgument("attribute " + quoted(name) + " holds no graph");
      to_proto(**g, *a.mutable_graph(), weights);
    }
  }
}

void to_proto(const Model& model, proto::Graph& out, WeightsWriter& weights) {
  out.set_name(model.name());
  for (const ValueInfo& v : model.values()) {
    proto::Value& pv = *out.add_values();
    pv.set_name(v.name);
    pv.set_type(to_proto(v.type));
    for (int64_t d : v.shape) pv.add_dims(d);
  }
  for (const Node& node : model.nodes()) {
    proto::Node& pn = *out.add_nodes();
    pn.set_name(node.name);
    pn.set_op_type(node.op_type);
    for (ValueId in : node.inputs) pn.add_inputs(in);
    for (ValueId o : node.outputs) pn.add_outputs(o);
    try {
      to_proto(node.attributes, *pn.mutable_attributes(), weights);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("node " + quoted(node.name) + ": " + e.what());
    }
  }
  for (ValueId in : model.inputs()) out.add_inputs(in);
  for (ValueId o : model.outputs()) out.add_outputs(o);
  for (const auto& [id, tensor] : model.constants()) {
    proto::Constant& c = *out.add_constants();
    c.set_value(id);
    weights.add(tensor, *c.mutable_tensor());
  }
}

// ---- reading ------------------------------------------------------------------------------------

Attributes from_proto(const google::protobuf::RepeatedPtrField<proto::Attribute>& attributes,
                      const WeightsView& weights, const std::string& where) {
  Attributes out;
  for (const proto::Attribute& a : attributes) {
    const std::string here = where + ", attribute " + quoted(a.name());
    if (out.has(a.name())) throw FormatError(here + " appears twice");
    switch (a.value_case()) {
      case proto::Attribute::kI:
        out.set(a.name(), a.i());
        break;
      case proto::Attribute::kF:
        out.set(a.name(), a.f());
        break;
      case proto::Attribute::kS:
        out.set(a.name(), a.s());
        break;
      case proto::Attribute::kInts:
        out.set(a.name(), std::vector<int64_t>(a.ints().values().begin(), a.ints().values().end()));
        break;
      case proto::Attribute::kFloats:
        out.set(a.name(),
                std::vector<double>(a.floats().values().begin(), a.floats().values().end()));
        break;
      case proto::Attribute::kStrings:
        out.set(a.name(),
                std::vector<std::string>(a.strings().values().begin(), a.strings().values().end()));
        break;
      case proto::Attribute::kTensor:
        out.set(a.name(), tensor_from_proto(a.tensor(), weights, here));
        break;
      case proto::Attribute::kGraph:
        out.set(a.name(), Subgraph(from_proto(a.graph(), weights, here)));
        break;
      case proto::Attribute::VALUE_NOT_SET:
        throw FormatError(here + " has no value");
    }
  }
  return out;
}

std::shared_ptr<Model> from_proto(const proto::Graph& graph, const WeightsView& weights,
                                  const std::string& source) {
  const auto value_count = static_cast<size_t>(graph.values_size());
  auto model = std::make_shared<Model>(graph.name());
  auto check_id = [&](int64_t id, const std::string& what) {
    if (id < 0 || static_cast<size_t>(id) >= value_count)
      throw FormatError(source + ": " + what + " refers to value id " + std::to_string(id) +
                        " (the graph has " + std::to_string(value_count) + " values)");
    return static_cast<size_t>(id);
  };

  std::vector<bool> is_input(value_count, false);
  std::vector<int> constant_of(value_count, -1);  // index into graph.constants()
  for (int32_t in : graph.inputs()) {
    size_t id = check_id(in, "a model input");
    if (is_input[id])
      throw FormatError(source + ": value " + quoted(graph.values(in).name()) +
                        " is listed twice as a model input");
    is_input[id] = true;
  }
  for (int c = 0; c < graph.constants_size(); ++c) {
    size_t id = check_id(graph.constants(c).value(), "a constant");
    if (constant_of[id] != -1 || is_input[id])
      throw FormatError(source + ": value " + quoted(graph.values(static_cast<int>(id)).name()) +
                        " is a constant twice or both a constant and a model input");
    constant_of[id] = c;
  }

  // Values keep their ids when the model inputs are in id order (what every writer produces);
  // otherwise the inputs come first, since Model numbers values in the order they are added.
  std::vector<size_t> order;
  order.reserve(value_count);
  const bool inputs_ascending = std::is_sorted(graph.inputs().begin(), graph.inputs().end());
  if (!inputs_ascending)
    for (int32_t in : graph.inputs()) order.push_back(static_cast<size_t>(in));
  for (size_t id = 0; id < value_count; ++id)
    if (inputs_ascending || !is_input[id]) order.push_back(id);

  std::vector<ValueId> new_id(value_count, no_value);
  try {
    for (size_t id : order) {
      const proto::Value& v = graph.values(static_cast<int>(id));
      const std::string where = source + ": value " + quoted(v.name());
      const ElementType type = from_proto(v.type(), where);
      for (int64_t d : v.dims())
        if (d < Shape::dynamic)
          throw FormatError(where + ": dimension " + std::to_string(d) + " is invalid");
      Shape shape(std::vector<int64_t>(v.dims().begin(), v.dims().end()));
      if (constant_of[id] != -1) {
        const proto::Tensor& t = graph.constants(constant_of[id]).tensor();
        Tensor data = tensor_from_proto(t, weights, where);
        if (type != data.element_type() || shape != data.shape())
          throw FormatError(where + " is declared " + std::string(to_string(type)) +
                            shape.to_string() + " but its data is " +
                            std::string(to_string(data.element_type())) + data.shape().to_string());
        new_id[id] = model->add_constant(v.name(), std::move(data));
      } else if (is_input[id]) {
        new_id[id] = model->add_input(v.name(), type, shape);
      } else {
        new_id[id] = model->add_value({v.name(), type, shape});
      }
    }
  } catch (const FormatError&) {
    throw;
  } catch (const Error& e) {  // duplicate names, undefined input types
    throw FormatError(source + ": " + e.what());
  }

  for (const proto::Node& pn : graph.nodes()) {
    const std::string where = source + ": node " + quoted(pn.name());
    Node node;
    node.name = pn.name();
    node.op_type = pn.op_type();
    for (int32_t in : pn.inputs())
      node.inputs.push_back(in == no_value ? no_value : new_id[check_id(in, where + " input")]);
    for (int32_t out : pn.outputs())
      node.outputs.push_back(new_id[check_id(out, where + " output")]);
    node.attributes = from_proto(pn.attributes(), weights, where);
    model->add_node(std::move(node));
  }
  for (int32_t out : graph.outputs()) model->add_output(new_id[check_id(out, "a model output")]);
  return model;
}

void validate_loaded(Model& model, const std::string& source) {
  try {
    model.validate();
  } catch (const UnsupportedOperation& e) {
    throw UnsupportedOperation(source + ": " + e.what());
  } catch (const ModelError& e) {
    throw FormatError(source + ": the stored graph does not validate: " + e.what());
  }
}

}  // namespace troupe::serialization
