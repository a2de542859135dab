#include "serialization/onnx_reader.hpp"

#include "engine/graph/transformations/transformations.hpp"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "engine/ops/control_flow.hpp"
#include "engine/ops/op_schema.hpp"
#include "serialization/message_text.hpp"
#include "troupe/error.hpp"

namespace troupe::serialization {

namespace {

namespace fs = std::filesystem;

constexpr const char* memory_source = "<memory buffer>";

bool is_default_domain(const std::string& domain) {
  return domain.empty() || domain == "ai.onnx";
}

std::string read_whole_file(const std::string& path, const char* what) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw InvalidArgument("cannot read " + std::string(what) + " '" + path +
                          "': it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InvalidArgument("cannot open " + std::string(what) + " '" + path +
                          "': " + std::strerror(errno));
  // One buffer of the file's size: a stream that grows its buffer would hold up to twice the
  // model's weights at once, and the peak memory of loading a model is its weights' multiple.
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  std::string bytes;
  if (size > 0) {
    bytes.resize(static_cast<size_t>(size));
    in.read(bytes.data(), size);
  }
  if (in.bad() || size < 0 || (size > 0 && in.gcount() != size))
    throw InvalidArgument("error while reading " + std::string(what) + " '" + path + "'");
  return bytes;
}

// ---- diagnosing a buffer protobuf refused -------------------------------------------------------

// Top-level fields of onnx.ModelProto: number -> (name, wire type).
const std::map<uint32_t, std::pair<const char*, int>>& model_proto_fields() {
  static const std::map<uint32_t, std::pair<const char*, int>> fields = {
      {1, {"ir_version", 0}},     {2, {"producer_name", 2}}, {3, {"producer_version", 2}},
      {4, {"domain", 2}},         {5, {"model_version", 0}}, {6, {"doc_string", 2}},
      {7, {"graph", 2}},          {8, {"opset_import", 2}},  {14, {"metadata_props", 2}},
      {20, {"training_info", 2}}, {25, {"functions", 2}}};
  return fields;
}

bool read_varint(const uint8_t* data, size_t size, size_t& pos, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= size) return false;
    uint8_t byte = data[pos++];
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

// Walks the top-level fields of a serialized ModelProto to say why it does not parse: a field that
// runs past the end means the file was cut short; a field a ModelProto cannot have means it is not
// an ONNX model at all.
[[noreturn]] void throw_parse_failure(const uint8_t* data, size_t size) {
  if (size == 0) throw FormatError("not an ONNX model: the file is empty");
  size_t pos = 0;
  while (pos < size) {
    const size_t field_start = pos;
    uint64_t tag = 0;
    if (!read_varint(data, size, pos, tag))
      throw FormatError("truncated ONNX model: the field tag at byte " +
                        std::to_string(field_start) + " runs past the end of the data (" +
                        std::to_string(size) + " bytes)");
    const uint32_t number = static_cast<uint32_t>(tag >> 3);
    const int wire = static_cast<int>(tag & 7);
    auto known = model_proto_fields().find(number);
    if (known == model_proto_fields().end() || known->second.second != wire)
      throw FormatError("not an ONNX model: byte " + std::to_string(field_start) +
                        " starts protobuf field " + std::to_string(number) + " of wire type " +
                        std::to_string(wire) + ", which an ONNX ModelProto does not have");
    const std::string field = std::string("field '") + known->second.first + "'";
    uint64_t value = 0;
    if (wire == 0) {
      if (!read_varint(data, size, pos, value))
        throw FormatError("truncated ONNX model: " + field + " at byte " +
                          std::to_string(field_start) + " runs past the end of the data (" +
                          std::to_string(size) + " bytes)");
    } else {  // length-delimited
      if (!read_varint(data, size, pos, value))
        throw FormatError("truncated ONNX model: the length of " + field + " at byte " +
                          std::to_string(field_start) + " runs past the end of the data");
      if (value > size - pos)
        throw FormatError("truncated ONNX model: " + field + " at byte " +
                          std::to_string(field_start) + " declares " + std::to_string(value) +
                          " bytes but only " + std::to_string(size - pos) +
                          " remain in the data (" + std::to_string(size) + " bytes in total)");
      pos += static_cast<size_t>(value);
    }
  }
  throw FormatError(
      "malformed ONNX model: the top-level fields are intact but a nested message (graph, node, "
      "tensor or attribute) is not valid protobuf");
}

// ---- element types and tensors ----------------------------------------------------------------

std::string onnx_type_name(int32_t data_type) {
  if (onnx::TensorProto_DataType_IsValid(data_type))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(data_type));
  return "data type " + std::to_string(data_type);
}

std::optional<ElementType> element_type_from_onnx(int32_t data_type) {
  switch (data_type) {
    case onnx::TensorProto::FLOAT:
      return ElementType::f32;
    case onnx::TensorProto::FLOAT16:
      return ElementType::f16;
    case onnx::TensorProto::BFLOAT16:
      return ElementType::bf16;
    case onnx::TensorProto::DOUBLE:
      return ElementType::f64;
    case onnx::TensorProto::INT8:
      return ElementType::i8;
    case onnx::TensorProto::UINT8:
      return ElementType::u8;
    case onnx::TensorProto::INT16:
      return ElementType::i16;
    case onnx::TensorProto::UINT16:
      return ElementType::u16;
    case onnx::TensorProto::INT32:
      return ElementType::i32;
    case onnx::TensorProto::UINT32:
      return ElementType::u32;
    case onnx::TensorProto::INT64:
      return ElementType::i64;
    case onnx::TensorProto::UINT64:
      return ElementType::u64;
    case onnx::TensorProto::BOOL:
      return ElementType::boolean;
    case onnx::TensorProto::STRING:
      return ElementType::string;
    default:
      return std::nullopt;
  }
}

ElementType require_element_type(int32_t data_type, const std::string& what) {
  if (data_type == onnx::TensorProto::UNDEFINED) throw ModelError(what + " has no element type");
  auto type = element_type_from_onnx(data_type);
  if (!type)
    throw UnsupportedOperation(what + " has element type " + onnx_type_name(data_type) +
                               ", which troupe does not support (it has f32, f16, bf16, f64, i8, "
                               "u8, i16, u16, i32, u32, i64, u64, bool, string)");
  return *type;
}

// Where tensors stored as external data are looked up.
struct ExternalDataContext {
  std::string base_dir;  // empty: external data is an error
};

std::optional<int64_t> parse_non_negative(const std::string& text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

// Where a tensor's external data is: a validated file region holding exactly `bytes` bytes.
struct ExternalRegion {
  fs::path file;
  int64_t offset = 0;
};

ExternalRegion locate_external_data(const onnx::TensorProto& proto, const std::string& what,
                                    const ExternalDataContext& ctx, int64_t bytes) {
  std::string location;
  int64_t offset = 0;
  std::optional<int64_t> length;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset" || entry.key() == "length") {
      auto value = parse_non_negative(entry.value());
      if (!value)
        throw ModelError(what + ": external data " + entry.key() + " '" + entry.value() +
                         "' is not a non-negative integer");
      (entry.key() == "offset" ? offset : length.emplace()) = *value;
    }
  }
  if (location.empty()) throw ModelError(what + " is stored as external data without a location");
  if (ctx.base_dir.empty())
    throw ModelError(what + " stores its data in external file '" + location +
                     "', but the model was read from memory without a base directory for "
                     "external data");
  const fs::path relative(location);
  if (relative.is_absolute())
    throw ModelError(what + ": external data location '" + location +
                     "' is an absolute path; it must be relative to the model's directory");
  for (const auto& part : relative)
    if (part == "..")
      throw ModelError(what + ": external data location '" + location +
                       "' leaves the model's directory");
  const fs::path full = fs::path(ctx.base_dir) / relative;
  std::error_code ec;
  if (!fs::is_regular_file(full, ec))
    throw ModelError(what + " stores its data in external file '" + full.string() +
                     "', which does not exist or is not a regular file");
  const auto file_size = static_cast<int64_t>(fs::file_size(full, ec));
  if (ec)
    throw ModelError(what + ": cannot read the size of external file '" + full.string() + "'");
  if (length && *length != bytes)
    throw ModelError(what + ": external data length " + std::to_string(*length) +
                     " bytes does not match its type and shape (" + std::to_string(bytes) +
                     " bytes)");
  if (offset > file_size || bytes > file_size - offset)
    throw ModelError(what + ": external file '" + full.string() + "' has " +
                     std::to_string(file_size) + " bytes, the tensor needs bytes [" +
                     std::to_string(offset) + ", " + std::to_string(offset + bytes) + ")");
  return {full, offset};
}

// A shape's `dim` (or a tensor's `dims`) is a repeated field a file can make as long as it likes;
// every later pass over shapes is at least linear in the rank, some quadratic.
void check_rank(int rank, const std::string& what) {
  if (rank > onnx_max_rank)
    throw ModelError(what + " has rank " + std::to_string(rank) + ", more than troupe's limit of " +
                     std::to_string(onnx_max_rank) + " dimensions");
}

// The repeated field that holds a tensor's values when it has no raw_data, and its length.
int typed_field_size(const onnx::TensorProto& proto, ElementType type) {
  switch (type) {
    case ElementType::f32:
      return proto.float_data_size();
    case ElementType::f64:
      return proto.double_data_size();
    case ElementType::i64:
      return proto.int64_data_size();
    case ElementType::u32:  // onnx.proto puts UINT32 and UINT64 in uint64_data
    case ElementType::u64:
      return proto.uint64_data_size();
    case ElementType::string:
      return proto.string_data_size();
    default:  // i32, i16, u16, i8, u8, bool, and the bits of f16 and bf16
      return proto.int32_data_size();
  }
}

const char* typed_field_name(ElementType type) {
  switch (type) {
    case ElementType::f32:
      return "float_data";
    case ElementType::f64:
      return "double_data";
    case ElementType::i64:
      return "int64_data";
    case ElementType::u32:
    case ElementType::u64:
      return "uint64_data";
    case ElementType::string:
      return "string_data";
    default:
      return "int32_data";
  }
}

template <class T, class Field>
void copy_field(const Field& field, Tensor& tensor) {
  T* dst = static_cast<T*>(tensor.raw_data());
  for (int i = 0; i < field.size(); ++i) dst[i] = static_cast<T>(field.Get(i));
}

// `what` names the tensor in errors ("initializer 'w'", "attribute 'value' of node 'c'").
// The amount of data is checked before anything is allocated, so a corrupt shape cannot make the
// reader allocate more than the file holds.
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& what,
                         const ExternalDataContext& ctx) {
  if (proto.has_segment())
    throw UnsupportedOperation(what + " is stored in segments, which troupe does not support");
  const ElementType type = require_element_type(proto.data_type(), what);
  check_rank(proto.dims_size(), what);
  std::vector<int64_t> dims;
  int64_t count = 1;
  // The product of the non-zero dimensions: a zero dimension makes the tensor empty, but the
  // strides still multiply the others, so they are bounded too.
  int64_t extent = 1;
  constexpr int64_t max_bytes = int64_t{1} << 40;
  for (int64_t d : proto.dims()) {
    if (d < 0) throw ModelError(what + " has negative dimension " + std::to_string(d));
    if (d != 0 && extent > max_bytes / d)
      throw ModelError(what + " is too large (more than 2^40 elements)");
    if (d != 0) extent *= d;
    count *= d;
    dims.push_back(d);
  }
  if (count > max_bytes / static_cast<int64_t>(element_size(type)))
    throw ModelError(what + " is too large (more than 1 TiB)");
  const int64_t bytes = count * static_cast<int64_t>(element_size(type));
  const Shape shape(dims);
  if (type == ElementType::string &&
      (proto.data_location() == onnx::TensorProto::EXTERNAL || proto.has_raw_data()))
    throw ModelError(what +
                     " is a string tensor stored as raw or external data; ONNX keeps "
                     "strings in string_data");

  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    const ExternalRegion region = locate_external_data(proto, what, ctx, bytes);
    Tensor tensor(type, shape);
    std::ifstream in(region.file, std::ios::binary);
    in.seekg(region.offset);
    in.read(static_cast<char*>(tensor.raw_data()), bytes);
    if (!in)
      throw ModelError(what + ": reading external file '" + region.file.string() + "' failed");
    if (type == ElementType::boolean) {
      auto* p = static_cast<uint8_t*>(tensor.raw_data());
      for (int64_t i = 0; i < count; ++i) p[i] = p[i] != 0;  // any non-zero byte is true
    }
    return tensor;
  }
  if (proto.has_raw_data()) {
    if (static_cast<int64_t>(proto.raw_data().size()) != bytes)
      throw ModelError(what + " has " + std::to_string(proto.raw_data().size()) +
                       " bytes of raw data, its type " + std::string(to_string(type)) +
                       " and shape " + shape.to_string() + " need " + std::to_string(bytes));
    Tensor tensor(type, shape);
    if (bytes > 0) std::memcpy(tensor.raw_data(), proto.raw_data().data(), bytes);
    if (type == ElementType::boolean) {
      auto* p = static_cast<uint8_t*>(tensor.raw_data());
      for (int64_t i = 0; i < count; ++i) p[i] = p[i] != 0;
    }
    return tensor;
  }
  if (typed_field_size(proto, type) != count)
    throw ModelError(what + " has " + std::to_string(typed_field_size(proto, type)) +
                     " values in " + typed_field_name(type) + ", its shape " + shape.to_string() +
                     " needs " + std::to_string(count));
  Tensor tensor(type, shape);
  switch (type) {
    case ElementType::f32:
      copy_field<float>(proto.float_data(), tensor);
      break;
    case ElementType::f64:
      copy_field<double>(proto.double_data(), tensor);
      break;
    case ElementType::i64:
      copy_field<int64_t>(proto.int64_data(), tensor);
      break;
    case ElementType::i32:
      copy_field<int32_t>(proto.int32_data(), tensor);
      break;
    case ElementType::i8:
      copy_field<int8_t>(proto.int32_data(), tensor);
      break;
    case ElementType::u8:
      copy_field<uint8_t>(proto.int32_data(), tensor);
      break;
    case ElementType::i16:
      copy_field<int16_t>(proto.int32_data(), tensor);
      break;
    case ElementType::u16:
      copy_field<uint16_t>(proto.int32_data(), tensor);
      break;
    case ElementType::u32:
      copy_field<uint32_t>(proto.uint64_data(), tensor);
      break;
    case ElementType::u64:
      copy_field<uint64_t>(proto.uint64_data(), tensor);
      break;
    case ElementType::f16:
    case ElementType::bf16:
      copy_field<uint16_t>(proto.int32_data(), tensor);
      break;
    case ElementType::boolean: {
      auto* p = static_cast<uint8_t*>(tensor.raw_data());
      for (int64_t i = 0; i < count; ++i) p[i] = proto.int32_data(static_cast<int>(i)) != 0;
      break;
    }
    case ElementType::string: {
      auto* p = tensor.data<std::string>();
      for (int64_t i = 0; i < count; ++i) p[i] = proto.string_data(static_cast<int>(i));
      break;
    }
    case ElementType::undefined:
      break;
  }
  return tensor;
}

// ---- the importer ------------------------------------------------------------------------------

std::string attribute_type_name(onnx::AttributeProto::AttributeType type) {
  return onnx::AttributeProto_AttributeType_IsValid(type)
             ? onnx::AttributeProto_AttributeType_Name(type)
             : "unknown attribute type " + std::to_string(static_cast<int>(type));
}

// Older writers leave AttributeProto.type unset; the field that holds the value tells it.
onnx::AttributeProto::AttributeType attribute_type(const onnx::AttributeProto& a) {
  if (a.type() != onnx::AttributeProto::UNDEFINED) return a.type();
  if (a.has_f()) return onnx::AttributeProto::FLOAT;
  if (a.has_i()) return onnx::AttributeProto::INT;
  if (a.has_s()) return onnx::AttributeProto::STRING;
  if (a.has_t()) return onnx::AttributeProto::TENSOR;
  if (a.has_g()) return onnx::AttributeProto::GRAPH;
  if (a.floats_size()) return onnx::AttributeProto::FLOATS;
  if (a.ints_size()) return onnx::AttributeProto::INTS;
  if (a.strings_size()) return onnx::AttributeProto::STRINGS;
  if (a.tensors_size()) return onnx::AttributeProto::TENSORS;
  if (a.graphs_size()) return onnx::AttributeProto::GRAPHS;
  return onnx::AttributeProto::UNDEFINED;
}

class OnnxImporter {
 public:
  OnnxImporter(onnx::ModelProto& proto, std::string default_name, ExternalDataContext ctx)
      : proto_(proto), ctx_(std::move(ctx)), default_name_(std::move(default_name)) {}

  // Reads a control-flow node's subgraph inside `parent`'s graph.
  OnnxImporter(OnnxImporter& parent, const std::string& name)
      : proto_(parent.proto_),
        ctx_(parent.ctx_),
        default_name_(name),
        opsets_(parent.opsets_),
        opset_(parent.opset_),
        model_(std::make_shared<Model>(name)),
        parent_(&parent) {}

  std::shared_ptr<Model> run() {
    check_header();
    check_ops_supported();
    // troupe's own conversion comes before the ONNX checker so that its errors (external data,
    // unsupported types) are the ones a user sees; the checker then catches structural problems
    // (attribute types, arity per opset, SSA form) with ONNX's wording.
    const onnx::GraphProto& graph = proto_.graph();
    model_ = std::make_shared<Model>(graph.name().empty() ? default_name_ : graph.name());
    add_initializers(graph);
    add_inputs(graph);
    declare_node_outputs(graph);
    add_nodes(graph);
    add_outputs(graph);
    run_onnx_checker();
    // Shapes are inferred by troupe's own schemas (Model::validate), not by libonnx: ONNX 1.12's
    // shape inference dereferences out of bounds on malformed nodes (a Conv whose input and weight
    // ranks disagree crashes it; see tests/serialization/data/onnx_fuzz/), and troupe needs its
    // own inference for every op it runs anyway. PyTorch's shape subgraphs (Shape -> Gather ->
    // Concat -> Reshape) are folded first where the shapes are static: troupe's schemas need
    // constant reshape targets to infer shapes at all.
    transformations::fold_constants_unvalidated(*model_);
    model_->validate();
    return model_;
  }

 private:
  void check_header() {
    if (!proto_.has_ir_version()) throw FormatError("not an ONNX model: it has no ir_version");
    if (!proto_.has_graph()) throw FormatError("not an ONNX model: it has no graph");
    // The default domain may be spelled "ai.onnx"; libonnx only knows "", so normalize.
    for (auto& import : *proto_.mutable_opset_import()) {
      if (is_default_domain(import.domain())) import.clear_domain();
      opsets_[import.domain()] = import.version();
    }
    for (auto& node : *proto_.mutable_graph()->mutable_node())
      if (node.domain() == "ai.onnx") node.clear_domain();
    auto it = opsets_.find("");
    if (it != opsets_.end()) {
      opset_ = it->second;
    } else if (proto_.ir_version() < 3) {
      opset_ = 1;  // before IR version 3 the opset was implied
    } else {
      for (const auto& node : proto_.graph().node())
        if (is_default_domain(node.domain()))
          throw ModelError("the model imports no opset of the default ONNX domain but node '" +
                           node.name() + "' (" + node.op_type() + ") belongs to it");
    }
    if (!proto_.graph().sparse_initializer().empty())
      throw UnsupportedOperation("sparse initializer '" +
                                 proto_.graph().sparse_initializer(0).values().name() +
                                 "': troupe does not support sparse tensors");
  }

  int64_t opset_of(const std::string& domain) const {
    if (is_default_domain(domain)) return opset_;
    auto it = opsets_.find(domain);
    return it == opsets_.end() ? 0 : it->second;
  }

  std::string describe_node(const onnx::NodeProto& node, int index) const {
    std::string name = node.name().empty() ? "#" + std::to_string(index) : quoted(node.name());
    return "node " + name + " (" + node.op_type() + ")";
  }

  // Names every node troupe has no schema for, so a user sees all missing ops at once.
  void check_ops_supported() const {
    const auto& schemas = OpSchemaRegistry::instance();
    std::vector<std::string> problems;
    std::set<std::string> seen;
    // Every node of the graph and of its subgraphs, at any depth.
    std::vector<std::pair<const onnx::NodeProto*, int>> nodes;
    std::vector<const onnx::GraphProto*> graphs{&proto_.graph()};
    while (!graphs.empty()) {
      const onnx::GraphProto* graph = graphs.back();
      graphs.pop_back();
      for (int i = 0; i < graph->node_size(); ++i) {
        nodes.emplace_back(&graph->node(i), i);
        for (const auto& a : graph->node(i).attribute()) {
          if (a.has_g()) graphs.push_back(&a.g());
          for (const auto& g : a.graphs()) graphs.push_back(&g);
        }
      }
    }
    for (const auto& [node_ptr, i] : nodes) {
      const auto& node = *node_ptr;
      const bool default_domain = is_default_domain(node.domain());
      if (default_domain && (node.op_type() == "Constant" || node.op_type() == "Upsample" ||
                             node.op_type() == "GroupNormalization"))
        continue;
      // A node of another domain has a schema only when troupe implements that domain's op.
      if (schemas.find(qualified_op_type(node.domain(), node.op_type()))) continue;
      const std::string domain = default_domain ? "ai.onnx" : node.domain();
      const std::string key = domain + "::" + node.op_type();
      if (!seen.insert(key).second) continue;
      std::string node_name = node.name().empty() ? "#" + std::to_string(i) : quoted(node.name());
      problems.push_back("op type '" + node.op_type() + "' (node " + node_name + ", domain '" +
                         domain + "', opset " + std::to_string(opset_of(node.domain())) + ")");
    }
    if (problems.empty()) return;
    std::string message =
        problems.size() == 1 ? "unsupported operation: " : "unsupported operations: ";
    for (size_t i = 0; i < problems.size(); ++i) message += (i ? "; " : "") + problems[i];
    throw UnsupportedOperation(message + "; troupe does not implement " +
                               (problems.size() == 1 ? "it" : "them"));
  }

  // The ONNX checker knows the IR and the opsets up to the versions libonnx was built with; a newer
  // model is left to troupe's own validation instead of being rejected for its version.
  bool onnx_library_knows_model() const {
    if (proto_.ir_version() > onnx::IR_VERSION) return false;
    const auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
    for (const auto& [domain, version] : opsets_) {
      auto it = ranges.find(domain);
      if (it == ranges.end() || version > it->second.second) return false;
    }
    return true;
  }

  // What onnx::checker::check_model(ModelProto) does, but with the model's directory set so that
  // the checker looks for external data where the reader did.
  void run_onnx_checker() const {
    if (!onnx_library_knows_model()) return;
    try {
      onnx::checker::CheckerContext ctx;
      ctx.set_ir_version(static_cast<int>(proto_.ir_version()));
      std::unordered_map<std::string, int> imports;
      for (const auto& [domain, version] : opsets_) imports[domain] = static_cast<int>(version);
      if (imports.empty()) {
        if (proto_.ir_version() >= 3)
          throw ModelError("invalid ONNX model: IR version 3 and later must import an opset");
        imports[""] = 1;
      }
      ctx.set_opset_imports(imports);
      ctx.set_model_dir(ctx_.base_dir.empty() ? "." : ctx_.base_dir);
      onnx::checker::LexicalScopeContext lexical;
      onnx::checker::check_graph(proto_.graph(), ctx, lexical);
      if (proto_.ir_version() >= 8)
        onnx::checker::check_model_local_functions(proto_, ctx, lexical);
    } catch (const ModelError&) {
      throw;
    } catch (const std::exception& e) {
      throw ModelError(std::string("invalid ONNX model: ") + e.what());
    }
  }

  void add_initializers(const onnx::GraphProto& graph) {
    for (const auto& init : graph.initializer()) {
      const std::string what = "initializer " + quoted(init.name());
      if (init.name().empty()) throw ModelError("an initializer has no name");
      if (model_->find_value(init.name()))
        throw ModelError("initializer " + quoted(init.name()) + " is defined twice");
      model_->add_constant(init.name(), tensor_from_proto(init, what, ctx_));
    }
  }

  Shape shape_from_proto(const onnx::TensorShapeProto& shape, const std::string& what) const {
    check_rank(shape.dim_size(), what);
    std::vector<int64_t> dims;
    for (const auto& dim : shape.dim()) {
      if (dim.has_dim_value()) {
        if (dim.dim_value() < 0)
          throw ModelError(what + " has negative dimension " + std::to_string(dim.dim_value()));
        dims.push_back(dim.dim_value());
      } else {
        dims.push_back(Shape::dynamic);  // symbolic (dim_param) or unknown
      }
    }
    return Shape(std::move(dims));
  }

  void add_inputs(const onnx::GraphProto& graph) {
    for (const auto& input : graph.input()) {
      if (input.name().empty()) throw ModelError("a graph input has no name");
      auto existing = model_->find_value(input.name());
      if (existing && model_->is_constant(*existing)) continue;  // an initializer with a default
      if (existing) throw ModelError("graph input " + quoted(input.name()) + " is declared twice");
      const std::string what = "graph input " + quoted(input.name());
      const auto& type = input.type();
      if (type.value_case() != onnx::TypeProto::kTensorType) {
        const char* kind = type.value_case() == onnx::TypeProto::kSequenceType   ? "a sequence"
                           : type.value_case() == onnx::TypeProto::kOptionalType ? "an optional"
                           : type.value_case() == onnx::TypeProto::kMapType      ? "a map"
                           : type.value_case() == onnx::TypeProto::kSparseTensorType
                               ? "a sparse tensor"
                               : "of no type";
        if (type.value_case() == onnx::TypeProto::VALUE_NOT_SET)
          throw ModelError(what + " has no type");
        throw UnsupportedOperation(what + " is " + kind + "; troupe supports dense tensors only");
      }
      const ElementType element_type = require_element_type(type.tensor_type().elem_type(), what);
      if (!type.tensor_type().has_shape())
        throw ModelError(what +
                         " has no shape (not even a rank); troupe needs the rank of every "
                         "model input");
      model_->add_input(input.name(), element_type,
                        shape_from_proto(type.tensor_type().shape(), what));
    }
  }

  // Turns a Constant node into a model constant named after its output.
  void add_constant_node(const onnx::NodeProto& node, int index) {
    const std::string where = describe_node(node, index);
    if (node.output_size() != 1 || node.output(0).empty())
      throw ModelError(where + " must have exactly one output");
    if (node.input_size() != 0) throw ModelError(where + " takes no inputs");
    if (node.attribute_size() != 1)
      throw ModelError(where +
                       " must have exactly one attribute (value, value_float, "
                       "value_floats, value_int or value_ints), has " +
                       std::to_string(node.attribute_size()));
    const auto& a = node.attribute(0);
    const std::string what = "attribute '" + a.name() + "' of " + where;
    Tensor value;
    if (a.name() == "value") {
      if (!a.has_t()) throw ModelError(what + " holds no tensor");
      value = tensor_from_proto(a.t(), what, ctx_);
    } else if (a.name() == "value_float") {
      value = Tensor::from_vector<float>(Shape{}, {a.f()});
    } else if (a.name() == "value_floats") {
      value = Tensor::from_vector<float>(Shape{static_cast<int64_t>(a.floats_size())},
                                         {a.floats().begin(), a.floats().end()});
    } else if (a.name() == "value_int") {
      value = Tensor::from_vector<int64_t>(Shape{}, {a.i()});
    } else if (a.name() == "value_ints") {
      value = Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(a.ints_size())},
                                           {a.ints().begin(), a.ints().end()});
    } else if (a.name() == "value_string" || a.name() == "value_strings" ||
               a.name() == "sparse_value") {
      throw UnsupportedOperation(what + ": troupe does not support string or sparse constants");
    } else {
      throw ModelError(where + " has unknown attribute '" + a.name() + "'");
    }
    if (model_->find_value(node.output(0)))
      throw ModelError(where + ": value " + quoted(node.output(0)) + " is defined twice");
    model_->add_constant(node.output(0), value);
  }

  void declare_node_outputs(const onnx::GraphProto& graph) {
    for (int i = 0; i < graph.node_size(); ++i) {
      const auto& node = graph.node(i);
      if (is_default_domain(node.domain()) && node.op_type() == "Constant") {
        add_constant_node(node, i);
        continue;
      }
      for (const auto& output : node.output()) {
        if (output.empty()) continue;  // an omitted optional output
        if (model_->find_value(output))
          throw ModelError(describe_node(node, i) + ": value " + quoted(output) +
                           " is defined twice (by this node and by an earlier node, input or "
                           "initializer)");
        model_->add_value({output, ElementType::undefined, Shape{}});
      }
    }
  }

  AttributeValue convert_attribute(const onnx::AttributeProto& a, const std::string& where) {
    const std::string what = "attribute '" + a.name() + "' of " + where;
    if (!a.ref_attr_name().empty())
      throw ModelError(what + " refers to a function attribute outside a function");
    switch (attribute_type(a)) {
      case onnx::AttributeProto::FLOAT:
        return static_cast<double>(a.f());
      case onnx::AttributeProto::INT:
        return static_cast<int64_t>(a.i());
      case onnx::AttributeProto::STRING:
        return a.s();
      case onnx::AttributeProto::TENSOR:
        return tensor_from_proto(a.t(), what, ctx_);
      case onnx::AttributeProto::FLOATS:
        return std::vector<double>(a.floats().begin(), a.floats().end());
      case onnx::AttributeProto::INTS:
        return std::vector<int64_t>(a.ints().begin(), a.ints().end());
      case onnx::AttributeProto::STRINGS:
        return std::vector<std::string>(a.strings().begin(), a.strings().end());
      case onnx::AttributeProto::UNDEFINED:
        throw ModelError(what + " has no value");
      default:
        throw UnsupportedOperation(what + " is of type " + attribute_type_name(attribute_type(a)) +
                                   ", which troupe does not support");
    }
  }

  // The node's own name when it has a unique one; otherwise "<op_type>_<index>" (or the name with a
  // suffix), avoiding every name the model's nodes bring.
  std::string unique_node_name(const onnx::NodeProto& node, int index,
                               const std::set<std::string>& given) {
    std::string name = node.name();
    if (name.empty() || used_node_names_.count(name)) {
      const std::string base = name.empty() ? node.op_type() + "_" + std::to_string(index) : name;
      name = base;
      for (int n = 1; used_node_names_.count(name) || (name != node.name() && given.count(name));
           ++n)
        name = base + "_" + std::to_string(n);
    }
    used_node_names_.insert(name);
    return name;
  }

  void add_nodes(const onnx::GraphProto& graph) {
    std::set<std::string> given;
    for (const auto& node : graph.node())
      if (!node.name().empty()) given.insert(node.name());
    for (int i = 0; i < graph.node_size(); ++i) {
      const auto& proto = graph.node(i);
      if (is_default_domain(proto.domain()) && proto.op_type() == "Constant") continue;
      const std::string where = describe_node(proto, i);
      Node node;
      node.name = unique_node_name(proto, i, given);
      node.op_type = qualified_op_type(proto.domain(), proto.op_type());
      for (const auto& input : proto.input()) {
        if (input.empty()) {
          node.inputs.push_back(no_value);
          continue;
        }
        auto id = model_->find_value(input);
        if (!id) id = capture(input);
        if (!id)
          throw ModelError(where + ": input " + quoted(input) +
                           " is neither a graph input, an initializer nor an output of any node");
        node.inputs.push_back(*id);
      }
      while (!node.inputs.empty() && node.inputs.back() == no_value) node.inputs.pop_back();
      int last_output = proto.output_size() - 1;
      while (last_output >= 0 && proto.output(last_output).empty()) --last_output;
      for (int o = 0; o <= last_output; ++o) {
        const auto& output = proto.output(o);
        if (output.empty()) {
          // An omitted output in the middle still needs a value to keep the positions.
          std::string name = node.name + "/unused_output_" + std::to_string(o);
          while (model_->find_value(name)) name += "_";
          node.outputs.push_back(model_->add_value({name, ElementType::undefined, Shape{}}));
        } else {
          node.outputs.push_back(*model_->find_value(output));
        }
      }
      // Values a subgraph reads from this graph (or from further out) become inputs of the
      // node after its formal ones, so the node is ordered, kept alive and planned after them.
      std::vector<std::string> captured;                                    // all subgraphs'
      std::vector<std::pair<std::string, std::vector<std::string>>> reads;  // per subgraph
      for (const auto& a : proto.attribute()) {
        if (a.name().empty()) throw ModelError(where + " has an attribute without a name");
        if (node.attributes.has(a.name()))
          throw ModelError(where + " has attribute '" + a.name() + "' twice");
        if (attribute_type(a) == onnx::AttributeProto::GRAPH) {
          reads.emplace_back(a.name(), std::vector<std::string>{});
          node.attributes.set(
              a.name(), read_subgraph(a.g(), node.name + "/" + a.name(), reads.back().second));
          continue;
        }
        node.attributes.set(a.name(), convert_attribute(a, where));
      }
      if (!reads.empty()) {
        const auto formal = static_cast<int64_t>(node.inputs.size());
        node.attributes.set(control_flow::formal_inputs_attribute, formal);
        for (auto& [attribute, names] : reads) {
          // Positions, not names: graph transformations may rename the values a node reads.
          std::vector<int64_t> positions;
          for (const std::string& name : names) {
            auto at = std::find(captured.begin(), captured.end(), name);
            if (at == captured.end()) at = captured.insert(captured.end(), name);
            positions.push_back(formal + (at - captured.begin()));
          }
          node.attributes.set(control_flow::captured_attribute_prefix + attribute, positions);
        }
        for (const std::string& name : captured) {
          auto id = model_->find_value(name);
          if (!id) id = capture(name);
          node.inputs.push_back(*id);  // read_subgraph checked that it resolves
        }
      }
      node.attributes.set(onnx_opset_attribute, opset_);
      if (node.op_type == "Upsample" || (node.op_type == "Resize" && opset_ < 11))
        upgrade_legacy_resize(node, where);
      if (node.op_type == "GroupNormalization") {
        add_group_normalization(node, where);
        continue;
      }
      model_->add_node(std::move(node));
    }
  }

  // A subgraph as a Model whose inputs are its formal inputs, then the values it reads from the
  // enclosing graphs (their names go to `captured`, in the order of those inputs).
  Subgraph read_subgraph(const onnx::GraphProto& graph, const std::string& name,
                         std::vector<std::string>& captured) {
    OnnxImporter sub(*this, graph.name().empty() ? name : graph.name());
    sub.add_initializers(graph);
    sub.add_subgraph_inputs(graph);
    sub.declare_node_outputs(graph);
    sub.add_nodes(graph);
    sub.add_outputs(graph);
    for (const std::string& c : sub.captured_) {
      captured.push_back(c);
      if (!model_->find_value(c) && !capture(c))
        throw ModelError("subgraph " + quoted(sub.model_->name()) + " reads " + quoted(c) +
                         ", which no enclosing graph defines");
    }
    return sub.model_;
  }

  // Makes `name`, defined by an enclosing graph, an input of this subgraph. Its type and shape
  // here are placeholders: the control-flow op's shape inference gives the subgraph the actual
  // ones of the node's inputs before inferring anything inside it.
  std::optional<ValueId> capture(const std::string& name) {
    if (!parent_) return std::nullopt;
    if (!parent_->model_->find_value(name) && !parent_->capture(name)) return std::nullopt;
    captured_.push_back(name);
    return model_->add_input(name, ElementType::f32, Shape{});
  }

  // A subgraph's formal inputs may leave out their types and shapes (a Loop body's loop-carried
  // values often do): the op's shape inference sets them from the node's inputs, as for captures.
  void add_subgraph_inputs(const onnx::GraphProto& graph) {
    for (const auto& input : graph.input()) {
      if (input.name().empty()) throw ModelError("a subgraph input has no name");
      const std::string what = "subgraph input " + quoted(input.name());
      if (model_->find_value(input.name()))
        throw ModelError(what + " is declared twice or is also an initializer");
      const auto& type = input.type();
      if (type.value_case() != onnx::TypeProto::kTensorType &&
          type.value_case() != onnx::TypeProto::VALUE_NOT_SET)
        throw UnsupportedOperation(what + " is not a tensor; troupe supports dense tensors only");
      ElementType element_type = ElementType::f32;
      if (type.tensor_type().elem_type() != 0)
        element_type = require_element_type(type.tensor_type().elem_type(), what);
      model_->add_input(input.name(), element_type, Shape{});
    }
  }

  // Upsample (opsets 7-9: scales as an attribute, then as input 1) and Resize-10 (X, scales)
  // become the Resize of opset 11+, so one schema and the same kernels serve them. Their
  // sampling is Resize's "asymmetric" coordinates with the nearest pixel rounded down, and each
  // output dimension is floor(input dimension * scale), as Resize's scales give.
  void upgrade_legacy_resize(Node& node, const std::string& where) {
    std::string mode = node.attributes.get_string_or("mode", "nearest");
    if (mode == "bilinear") mode = "linear";  // the older exporters' spelling
    if (mode != "nearest" && mode != "linear")
      throw ModelError(where + ": attribute 'mode' is '" + mode + "', expected nearest or linear");
    ValueId scales = no_value;
    if (node.attributes.has("scales")) {
      if (node.inputs.size() != 1)
        throw ModelError(where + ": scales are given both as an attribute and as input 1");
      std::vector<float> values;
      for (double v : node.attributes.get_floats("scales")) values.push_back(static_cast<float>(v));
      std::string name = node.name + "/scales";
      while (model_->find_value(name)) name += "_";
      scales = model_->add_constant(
          name, Tensor::from_vector<float>(Shape{static_cast<int64_t>(values.size())}, values));
      node.attributes.erase("scales");
    } else if (node.inputs.size() == 2) {
      scales = node.inputs[1];
    } else {
      throw ModelError(where + ": expected inputs (X, scales), got " +
                       std::to_string(node.inputs.size()) + " inputs");
    }
    node.op_type = "Resize";
    node.inputs = {node.inputs[0], no_value, scales};
    node.attributes.set("mode", mode);
    node.attributes.set("coordinate_transformation_mode", std::string("asymmetric"));
    node.attributes.set("nearest_mode", std::string("floor"));
  }

  // GroupNormalization (opsets 18 and 21) as the ops torch exports GroupNorm as, which troupe
  // runs (and fuses) already: X [N, C, ...] viewed as [N, G, C / G * ...] and normalized per
  // group by InstanceNormalization, then viewed as X again. Opset 18's scale and bias are per
  // group: the normalization applies them. Opset 21's are per channel: applied after it, on X
  // viewed as [N, C, ...flattened].
  void add_group_normalization(const Node& node, const std::string& where) {
    if (node.inputs.size() != 3 || node.inputs[1] == no_value || node.inputs[2] == no_value ||
        node.outputs.size() != 1)
      throw ModelError(where + ": expected inputs (X, scale, bias) and one output");
    if (!node.attributes.has("num_groups"))
      throw ModelError(where + ": attribute 'num_groups' is required");
    const int64_t groups = node.attributes.get_int("num_groups");
    if (groups < 1)
      throw ModelError(where + ": attribute 'num_groups' is " + std::to_string(groups) +
                       ", expected >= 1");
    const double epsilon = node.attributes.get_float_or("epsilon", 1e-5);
    const ValueId x = node.inputs[0], scale = node.inputs[1], bias = node.inputs[2];
    const auto name_for = [&](const std::string& suffix) {
      std::string name = node.name + "/" + suffix;
      while (model_->find_value(name) || used_node_names_.count(name)) name += "_";
      return name;
    };
    const auto int64s = [&](const std::string& suffix, const std::vector<int64_t>& values) {
      return model_->add_constant(
          name_for(suffix),
          Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(values.size())}, values));
    };
    const auto add = [&](const std::string& op_type, const std::vector<ValueId>& inputs,
                         const std::string& suffix, ValueId output = no_value) {
      Node part;
      part.name = name_for(suffix);
      used_node_names_.insert(part.name);
      part.op_type = op_type;
      part.inputs = inputs;
      if (output == no_value)
        output = model_->add_value({part.name + "_output", ElementType::undefined, Shape{}});
      part.outputs = {output};
      part.attributes.set(onnx_opset_attribute, opset_);
      if (op_type == "InstanceNormalization") part.attributes.set("epsilon", epsilon);
      model_->add_node(std::move(part));
      return output;
    };
    const bool per_channel = opset_ >= 21;
    ValueId group_scale = scale, group_bias = bias;
    if (per_channel) {
      // The affine map comes after; the normalization's own is the identity, in scale's type.
      const ElementType type = model_->value(scale).type == ElementType::undefined
                                   ? ElementType::f32
                                   : model_->value(scale).type;
      Tensor ones(ElementType::f32, Shape{groups});
      Tensor zeros(ElementType::f32, Shape{groups});
      for (int64_t g = 0; g < groups; ++g) {
        ones.data<float>()[g] = 1.f;
        zeros.data<float>()[g] = 0.f;
      }
      group_scale = model_->add_constant(name_for("ones"), ones.convert(type));
      group_bias = model_->add_constant(name_for("zeros"), zeros.convert(type));
    }
    const ValueId flat = add("Reshape", {x, int64s("flat_shape", {0, 0, -1})}, "flatten");
    const ValueId grouped = add("Reshape", {flat, int64s("group_shape", {0, groups, -1})}, "group");
    const ValueId normalized =
        add("InstanceNormalization", {grouped, group_scale, group_bias}, "normalize");
    ValueId y = add("Reshape", {normalized, add("Shape", {flat}, "flat_dims")}, "ungroup");
    if (per_channel) {
      const ValueId axes = int64s("channel_axes", {1});
      y = add("Mul", {y, add("Unsqueeze", {scale, axes}, "scale_column")}, "scale");
      y = add("Add", {y, add("Unsqueeze", {bias, axes}, "bias_column")}, "shift");
    }
    add("Reshape", {y, add("Shape", {x}, "dims")}, "unflatten", node.outputs[0]);
  }

  void add_outputs(const onnx::GraphProto& graph) {
    if (graph.output_size() == 0) throw ModelError("the graph has no outputs");
    std::set<ValueId> seen;
    for (const auto& output : graph.output()) {
      auto id = model_->find_value(output.name());
      if (!id)
        throw ModelError("graph output " + quoted(output.name()) +
                         " is neither produced by a node nor an input or initializer");
      if (!seen.insert(*id).second)
        throw ModelError("graph output " + quoted(output.name()) + " is listed twice");
      if (model_->is_constant(*id)) id = output_through_identity(*id);
      model_->add_output(*id);
    }
  }

  // A graph output that is a constant (an initializer or a Constant node) is produced by an
  // Identity node, so every model output comes out of the executed graph.
  ValueId output_through_identity(ValueId constant) {
    const std::string name = model_->value(constant).name;
    std::string constant_name = name + "/constant";
    while (model_->find_value(constant_name)) constant_name += "_";
    model_->rename_value(constant, constant_name);
    ValueId out = model_->add_value({name, ElementType::undefined, Shape{}});
    Node node;
    node.name = name + "/identity";
    while (used_node_names_.count(node.name)) node.name += "_";
    used_node_names_.insert(node.name);
    node.op_type = "Identity";
    node.inputs = {constant};
    node.outputs = {out};
    node.attributes.set(onnx_opset_attribute, opset_);
    model_->add_node(std::move(node));
    return out;
  }

  onnx::ModelProto& proto_;
  ExternalDataContext ctx_;
  std::string default_name_;
  std::map<std::string, int64_t> opsets_;
  int64_t opset_ = 0;
  std::shared_ptr<Model> model_;
  std::set<std::string> used_node_names_;
  OnnxImporter* parent_ = nullptr;     // the enclosing graph's importer, for a subgraph
  std::vector<std::string> captured_;  // what this subgraph reads from enclosing graphs
};

// Rethrows a troupe error (or any exception from protobuf or libonnx) with the source in front,
// keeping the error's type.
template <class Fn>
auto with_source(const std::string& source, Fn&& fn) -> decltype(fn()) {
  const std::string prefix = source + ": ";
  try {
    return fn();
  } catch (const UnsupportedOperation& e) {
    throw UnsupportedOperation(prefix + e.what());
  } catch (const ModelError& e) {
    throw ModelError(prefix + e.what());
  } catch (const FormatError& e) {
    throw FormatError(prefix + e.what());
  } catch (const TensorMismatch& e) {
    throw TensorMismatch(prefix + e.what());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(prefix + e.what());
  } catch (const Error& e) {
    throw Error(prefix + e.what());
  } catch (const std::bad_alloc&) {
    throw FormatError(prefix + "out of memory while reading the model");
  } catch (const std::exception& e) {
    throw ModelError(prefix + e.what());
  }
}

onnx::ModelProto parse_model_proto(const void* data, size_t size) {
  if (size > static_cast<size_t>(INT_MAX))
    throw FormatError(
        "the model is larger than 2 GiB, which protobuf cannot parse; store its "
        "weights as external data");
  onnx::ModelProto proto;
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (size == 0 || !proto.ParseFromArray(bytes, static_cast<int>(size)))
    throw_parse_failure(bytes, size);
  return proto;
}

std::shared_ptr<Model> read_model_buffer(const void* data, size_t size, const std::string& source,
                                         const std::string& default_name,
                                         const std::string& base_dir) {
  return with_source(source, [&] {
    onnx::ModelProto proto = parse_model_proto(data, size);
    return OnnxImporter(proto, default_name, ExternalDataContext{base_dir}).run();
  });
}

}  // namespace

std::shared_ptr<Model> read_onnx_model(const std::string& path) {
  fs::path p(path);
  std::string base_dir = p.parent_path().string();
  if (base_dir.empty()) base_dir = ".";
  std::string bytes = read_whole_file(path, "ONNX model");
  return with_source(path, [&] {
    onnx::ModelProto proto = parse_model_proto(bytes.data(), bytes.size());
    // The file's bytes go before the weights are converted: otherwise the file, its parsed form
    // and the model would all be in memory at once.
    std::string().swap(bytes);
    return OnnxImporter(proto, p.stem().string(), ExternalDataContext{base_dir}).run();
  });
}

std::shared_ptr<Model> read_onnx_model_from_buffer(const void* data, size_t size,
                                                   const std::string& base_dir_for_external_data) {
  return read_model_buffer(data, size, memory_source, "onnx_model", base_dir_for_external_data);
}

Tensor read_onnx_tensor(const std::string& path) {
  const std::string bytes = read_whole_file(path, "ONNX tensor");
  return read_onnx_tensor_from_buffer(bytes.data(), bytes.size(), path);
}

Tensor read_onnx_tensor_from_buffer(const void* data, size_t size, const std::string& source) {
  return with_source(source, [&] {
    onnx::TensorProto proto;
    if (size > static_cast<size_t>(INT_MAX) || !proto.ParseFromArray(data, static_cast<int>(size)))
      throw FormatError("not a serialized ONNX TensorProto (protobuf parsing failed)");
    const std::string what = proto.name().empty() ? "tensor" : "tensor " + quoted(proto.name());
    return tensor_from_proto(proto, what, ExternalDataContext{});
  });
}

}  // namespace troupe::serialization
