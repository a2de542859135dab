#include "serialization/blob/compiled_blob.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "serialization/byte_io.hpp"
#include "serialization/compiled_blob.pb.h"
#include "serialization/file_io.hpp"
#include "serialization/fingerprint.hpp"
#include "serialization/graph_proto.hpp"
#include "serialization/message_text.hpp"
#include "troupe/error.hpp"
#include "troupe/version.hpp"

#ifdef TROUPE_PROJECT_VERSION
namespace {
constexpr bool same_text(const char* a, const char* b) {
  return *a == *b && (*a == '\0' || same_text(a + 1, b + 1));
}
static_assert(same_text(TROUPE_VERSION, TROUPE_PROJECT_VERSION),
              "troupe/version.hpp's TROUPE_VERSION must equal the CMake project version");
}  // namespace
#endif

namespace troupe::serialization {

namespace {

constexpr uint64_t max_header_length = 1 << 20;
constexpr const char* blob_source = "compiled blob";

uint64_t payload_offset_of(uint64_t header_length) {
  return align_up(compiled_blob_prefix_length + header_length, weight_alignment);
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

// ---- configuration <-> proto --------------------------------------------------------------------

void to_proto(const detail::CompileConfig& c, proto::CompileConfig& out) {
  out.set_device_id(c.device_id);
  out.set_enable_profiling(c.enable_profiling);
  out.set_performance_mode(troupe::to_string(c.mode));
  out.set_num_requests_hint(c.num_requests_hint);
  out.set_num_streams(c.num_streams);
  out.set_threads_per_stream(c.threads_per_stream);
  out.set_inference_num_threads(c.inference_num_threads);
  out.set_disable_transformations(c.disable_transformations);
  out.set_exclusive_async_requests(c.exclusive_async_requests);
  out.set_inference_precision(serialization::to_proto(c.inference_precision));
  out.set_optimal_requests(c.optimal_requests);
  out.set_max_in_flight(c.max_in_flight);
  out.set_slots_per_stream(c.slots_per_stream);
}

detail::CompileConfig config_from_proto(const proto::CompileConfig& p) {
  const std::string where = std::string(blob_source) + " header: compile configuration";
  auto in_range = [&](const char* field, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      throw FormatError(where + " field " + field + " = " + std::to_string(v) +
                        " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                        "]");
    return static_cast<int>(v);
  };
  detail::CompileConfig c;
  c.device_id = p.device_id();
  c.enable_profiling = p.enable_profiling();
  if (p.performance_mode() == "LATENCY") {
    c.mode = PerformanceMode::latency;
  } else if (p.performance_mode() == "THROUGHPUT") {
    c.mode = PerformanceMode::throughput;
  } else {
    throw FormatError(where + " names unknown performance mode '" + p.performance_mode() + "'");
  }
  c.num_requests_hint = in_range("num_requests_hint", p.num_requests_hint(), 0, INT_MAX);
  c.num_streams = in_range("num_streams", p.num_streams(), 1, 4096);
  c.threads_per_stream = in_range("threads_per_stream", p.threads_per_stream(), 1, 4096);
  c.inference_num_threads = in_range("inference_num_threads", p.inference_num_threads(), 0, 4096);
  c.disable_transformations = p.disable_transformations();
  c.exclusive_async_requests = p.exclusive_async_requests();
  c.inference_precision = serialization::from_proto(p.inference_precision(), where);
  if (c.inference_precision != ElementType::f32 && c.inference_precision != ElementType::bf16)
    throw FormatError(where + " names inference precision '" +
                      std::string(troupe::to_string(c.inference_precision)) +
                      "' (allowed: f32, bf16)");
  c.optimal_requests = in_range("optimal_requests", p.optimal_requests(), 1, 1 << 20);
  c.max_in_flight = in_range("max_in_flight", p.max_in_flight(), 1, 1 << 20);
  c.slots_per_stream = in_range("slots_per_stream", p.slots_per_stream(), 1, 64);
  return c;
}

// ---- envelope -----------------------------------------------------------------------------------

proto::BlobHeader header_to_proto(const BlobInfo& info) {
  proto::BlobHeader h;
  h.set_troupe_version(info.troupe_version);
  h.set_device(info.device);
  h.set_model_name(info.model_name);
  for (const auto& c : info.cpu_capabilities) h.add_cpu_capabilities(c);
  for (const auto& c : info.required_capabilities) h.add_required_capabilities(c);
  to_proto(info.config, *h.mutable_config());
  h.set_payload_length(info.payload_length);
  h.set_payload_checksum(info.payload_checksum);
  return h;
}

// Prefix, header and the zero padding that puts the payload at a multiple of 64 bytes (so that
// weights of a mapped blob file are aligned in memory and used in place).
std::string envelope_prefix_and_header(const BlobInfo& info) {
  std::string header;
  header_to_proto(info).SerializeToString(&header);
  std::string out(compiled_blob_magic, 8);
  put_le(out, compiled_blob_format_version, 4);
  put_le(out, header.size(), 4);
  put_le(out, fingerprint64(header.data(), header.size()), 8);
  out += header;
  out.resize(payload_offset_of(header.size()), '\0');
  return out;
}

FormatError truncated(uint64_t at, const std::string& what, uint64_t offset, uint64_t length) {
  return FormatError(std::string(blob_source) + " is truncated at byte " + std::to_string(at) +
                     ": " + what + " needs bytes " + byte_range(offset, length));
}

std::shared_ptr<void> aligned_buffer(uint64_t bytes) {
  void* p = std::aligned_alloc(weight_alignment,
                               align_up(std::max<uint64_t>(bytes, 1), weight_alignment));
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

// The payload in memory, 64-byte aligned, with what keeps it alive and its fingerprint64.
struct PayloadBytes {
  const unsigned char* data;
  std::shared_ptr<void> owner;
  uint64_t checksum;
};

// Where a blob's bytes come from: a stream or a memory-mapped file.
class BlobSource {
 public:
  virtual ~BlobSource() = default;
  /// Copies up to n bytes; returns how many there were.
  virtual uint64_t read(void* dst, uint64_t n) = 0;
  /// The next `length` bytes. Throws "truncated" naming the blob's last byte (`offset` is where
  /// they start in the blob).
  virtual PayloadBytes take(uint64_t length, uint64_t offset) = 0;
};

class StreamSource : public BlobSource {
 public:
  explicit StreamSource(std::istream& in) : in_(in) {}
  uint64_t read(void* dst, uint64_t n) override {
    uint64_t done = 0;
    while (done < n && in_) {
      const auto chunk = static_cast<std::streamsize>(std::min<uint64_t>(n - done, 1u << 30));
      in_.read(static_cast<char*>(dst) + done, chunk);
      done += static_cast<uint64_t>(in_.gcount());
    }
    return done;
  }
  // Never allocates more than the stream really holds (plus one chunk), whatever `length` claims.
  // Hashes each chunk right after reading it, while it is still in cache.
  PayloadBytes take(uint64_t length, uint64_t offset) override {
    constexpr uint64_t chunk = 8u << 20;
    Fingerprint64 checksum;
    const std::streampos here = in_.tellg();
    if (here != std::streampos(-1)) {
      in_.seekg(0, std::ios::end);
      const std::streampos end = in_.tellg();
      in_.seekg(here);
      if (end != std::streampos(-1) && in_) {
        const auto available = static_cast<uint64_t>(end - here);
        if (available < length) throw truncated(offset + available, "the payload", offset, length);
        auto buffer = aligned_buffer(length);
        auto* p = static_cast<unsigned char*>(buffer.get());
        for (uint64_t done = 0; done < length;) {
          const uint64_t want = std::min(chunk, length - done);
          const uint64_t got = read(p + done, want);
          checksum.update(p + done, got);
          done += got;
          if (got < want) throw truncated(offset + done, "the payload", offset, length);
        }
        return {p, buffer, checksum.digest()};
      }
      in_.clear();
    }
    // Not seekable (a pipe): read in chunks until the length is reached or the stream ends.
    std::string bytes;
    while (bytes.size() < length) {
      const uint64_t want = std::min<uint64_t>(chunk, length - bytes.size());
      const size_t before = bytes.size();
      bytes.resize(before + want);
      const uint64_t got = read(bytes.data() + before, want);
      bytes.resize(before + got);
      checksum.update(bytes.data() + before, got);
      if (got < want) throw truncated(offset + bytes.size(), "the payload", offset, length);
    }
    auto buffer = aligned_buffer(length);
    if (length > 0) std::memcpy(buffer.get(), bytes.data(), length);
    return {static_cast<const unsigned char*>(buffer.get()), buffer, checksum.digest()};
  }

 private:
  std::istream& in_;
};

class MappedSource : public BlobSource {
 public:
  explicit MappedSource(FileBytes file) : file_(std::move(file)) {}
  uint64_t read(void* dst, uint64_t n) override {
    const uint64_t got = std::min(n, file_.size - position_);
    if (got > 0) std::memcpy(dst, file_.data + position_, got);
    position_ += got;
    return got;
  }
  PayloadBytes take(uint64_t length, uint64_t offset) override {
    const uint64_t available = file_.size - position_;
    if (available < length) throw truncated(offset + available, "the payload", offset, length);
    const unsigned char* p = file_.data + position_;
    position_ += length;
    const uint64_t checksum = fingerprint64(p, length);
    if (reinterpret_cast<uintptr_t>(p) % weight_alignment == 0) return {p, file_.owner, checksum};
    auto buffer = aligned_buffer(length);  // not mapped at an aligned address: copy
    if (length > 0) std::memcpy(buffer.get(), p, length);
    return {static_cast<const unsigned char*>(buffer.get()), buffer, checksum};
  }

 private:
  FileBytes file_;
  uint64_t position_ = 0;
};

// The header, checked for everything that does not depend on the importing machine. Leaves the
// source at the payload; `payload_offset` receives where that is.
BlobInfo read_envelope(BlobSource& in, uint64_t& payload_offset) {
  unsigned char prefix[compiled_blob_prefix_length];
  const uint64_t got = in.read(prefix, sizeof prefix);
  const size_t magic_seen = static_cast<size_t>(std::min<uint64_t>(got, 8));
  if (got == 0 || std::memcmp(prefix, compiled_blob_magic, magic_seen) != 0) {
    std::string what = got == 0 ? "missing (empty stream)" : describe_magic(prefix, magic_seen);
    std::string hint;
    if (magic_seen == 8 && std::memcmp(prefix, "TROUPEMD", 8) == 0)
      hint = " (this is a .troupe model file: read it with Core::read_model)";
    throw FormatError(std::string("not a troupe compiled blob: its magic is ") + what +
                      ", expected '" + compiled_blob_magic + "'" + hint);
  }
  if (got < compiled_blob_prefix_length)
    throw truncated(got, "the envelope header", 0, compiled_blob_prefix_length);
  BlobInfo info;
  info.format_version = static_cast<uint32_t>(get_le(prefix + 8, 4));
  if (info.format_version > compiled_blob_format_version)
    throw FormatError(std::string(blob_source) + " has format version " +
                      std::to_string(info.format_version) + ", newer than this troupe (" +
                      TROUPE_VERSION + ") reads (" + std::to_string(compiled_blob_format_version) +
                      ")");
  if (info.format_version < compiled_blob_format_version)
    throw FormatError(std::string(blob_source) + " has format version " +
                      std::to_string(info.format_version) +
                      ", which this troupe no longer reads (" +
                      std::to_string(compiled_blob_format_version) + ")");
  const uint64_t header_length = get_le(prefix + 12, 4);
  const uint64_t header_checksum = get_le(prefix + 16, 8);
  if (header_length > max_header_length)
    throw FormatError(std::string(blob_source) + ": header length " +
                      std::to_string(header_length) + " is implausible (limit " +
                      std::to_string(max_header_length) + "): the blob is corrupt");
  payload_offset = payload_offset_of(header_length);
  // The header and the padding after it, read together.
  std::string header(payload_offset - compiled_blob_prefix_length, '\0');
  const uint64_t header_got = in.read(header.data(), header.size());
  if (header_got < header.size())
    throw truncated(compiled_blob_prefix_length + header_got, "the header",
                    compiled_blob_prefix_length, header.size());
  for (size_t i = header_length; i < header.size(); ++i)
    if (header[i] != '\0')
      throw FormatError(std::string(blob_source) + ": padding byte " +
                        std::to_string(compiled_blob_prefix_length + i) +
                        " after the header is not zero: the blob is corrupt");
  header.resize(header_length);
  const uint64_t actual = fingerprint64(header.data(), header.size());
  if (actual != header_checksum)
    throw FormatError(std::string(blob_source) + ": header checksum mismatch (stored " +
                      to_hex(header_checksum) + ", computed " + to_hex(actual) +
                      "): the blob is corrupt");
  proto::BlobHeader h;
  if (!h.ParseFromString(header))
    throw FormatError(std::string(blob_source) + ": bytes " +
                      byte_range(compiled_blob_prefix_length, header_length) +
                      " are not a valid troupe.proto.BlobHeader message");
  info.troupe_version = h.troupe_version();
  info.device = h.device();
  info.model_name = h.model_name();
  info.cpu_capabilities.assign(h.cpu_capabilities().begin(), h.cpu_capabilities().end());
  info.required_capabilities.assign(h.required_capabilities().begin(),
                                    h.required_capabilities().end());
  info.config = config_from_proto(h.config());
  info.payload_length = h.payload_length();
  info.payload_checksum = h.payload_checksum();
  return info;
}

std::shared_ptr<detail::CompiledGraph> graph_from_payload(const unsigned char* p,
                                                          const std::shared_ptr<void>& owner,
                                                          uint64_t length) {
  const std::string source = blob_source;
  if (length < 8)
    throw FormatError(source + ": payload of " + std::to_string(length) +
                      " bytes has no graph length");
  const uint64_t graph_length = get_le(p, 8);
  if (graph_length > length - 8 || graph_length > static_cast<uint64_t>(INT_MAX))
    throw FormatError(source + ": graph length " + std::to_string(graph_length) +
                      " does not fit the payload of " + std::to_string(length) + " bytes");
  const uint64_t weights_offset = align_up(8 + graph_length, weight_alignment);
  if (weights_offset > length)
    throw FormatError(source + ": the weights section would start at payload byte " +
                      std::to_string(weights_offset) + ", past its end (" + std::to_string(length) +
                      ")");
  proto::CompiledGraph cg;
  if (!cg.ParseFromArray(p + 8, static_cast<int>(graph_length)))
    throw FormatError(source + ": payload bytes " + byte_range(8, graph_length) +
                      " are not a valid troupe.proto.CompiledGraph message");
  const WeightsView weights{p + weights_offset, length - weights_offset, owner};
  auto model = serialization::from_proto(cg.graph(), weights, source);
  if (cg.nodes_size() != cg.graph().nodes_size())
    throw FormatError(source + ": " + std::to_string(cg.nodes_size()) +
                      " compiled nodes for a graph of " + std::to_string(cg.graph().nodes_size()) +
                      " nodes");
  validate_loaded(*model, source);
  try {
    detail::check_values_fit_memory(*model);
  } catch (const ModelError& e) {
    throw FormatError(source + ": " + e.what());
  }

  auto graph = std::make_shared<detail::CompiledGraph>();
  for (int i = 0; i < cg.nodes_size(); ++i) {
    // The stored order is the execution order the implementations refer to; validation keeps a
    // topologically sorted order as it is, so a change means the stored graph was not sorted.
    if (model->nodes()[static_cast<size_t>(i)].name != cg.graph().nodes(i).name())
      throw FormatError(source + ": node '" + cg.graph().nodes(i).name() +
                        "' is not stored in execution order");
    const proto::CompiledNode& n = cg.nodes(i);
    graph->implementations.push_back(n.implementation());
    graph->output_layouts.push_back(n.output_layouts());
    graph->original_names.emplace_back(n.original_names().begin(), n.original_names().end());
  }
  for (ValueId in : model->inputs())
    if (!model->value(in).shape.is_static()) graph->dynamic_shapes = true;
  graph->blocked_layouts = !cg.plain_layouts();
  graph->model = std::move(model);
  return graph;
}

// Counts and fingerprints what is written through it, so the payload checksum can be computed
// without materializing the payload.
class FingerprintBuf : public std::streambuf {
 public:
  Fingerprint64 fingerprint;
  uint64_t count = 0;

 protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) {
      const char ch = static_cast<char>(c);
      fingerprint.update(&ch, 1);
      ++count;
    }
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    fingerprint.update(s, static_cast<size_t>(n));
    count += static_cast<uint64_t>(n);
    return n;
  }
};

struct Payload {
  std::string head;  // graph length + graph message + padding
  WeightsWriter weights;
  uint64_t length() const { return head.size() + weights.size(); }
  void write(std::ostream& out) const {
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    weights.write(out);
  }
};

void make_payload(const detail::CompiledGraph& graph, Payload& payload) {
  proto::CompiledGraph cg;
  // Constants the kernels hold packed are rebuilt (exactly) for the blob.
  const std::shared_ptr<const Model> model =
      graph.released_constants.empty() ? graph.model : detail::model_with_all_constants(graph);
  serialization::to_proto(*model, *cg.mutable_graph(), payload.weights);
  const size_t n = graph.model->nodes().size();
  for (size_t i = 0; i < n; ++i) {
    proto::CompiledNode& node = *cg.add_nodes();
    node.set_implementation(i < graph.implementations.size() ? graph.implementations[i] : "ref");
    if (i < graph.original_names.size())
      for (const auto& name : graph.original_names[i]) node.add_original_names(name);
    if (i < graph.output_layouts.size()) node.set_output_layouts(graph.output_layouts[i]);
  }
  cg.set_dynamic_shapes(graph.dynamic_shapes);
  cg.set_plain_layouts(!graph.blocked_layouts);
  std::string message;
  if (!cg.SerializeToString(&message))
    throw InvalidArgument("export_model: the graph message of model '" + graph.model->name() +
                          "' exceeds protobuf's 2 GB limit");
  payload.head.clear();
  put_le(payload.head, message.size(), 8);
  payload.head += message;
  payload.head.resize(align_up(payload.head.size(), weight_alignment), '\0');
}

bool contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

}  // namespace

std::vector<std::string> required_capabilities(const detail::CompiledGraph& graph,
                                               const detail::CompileConfig& config,
                                               const std::vector<std::string>& compiled_on) {
  std::set<std::string> needed;
  if (config.inference_precision == ElementType::bf16) {
    needed.insert("BF16");
    // bf16 kernels chosen on an AMX CPU use AMX tiles and AMX-blocked weight layouts.
    if (contains(compiled_on, "AMX")) needed.insert("AMX");
  }
  // The graph's fusions and activation layouts were chosen for the compiling CPU's ISA (which
  // convolutions run in one pass, blocked by 8 or 16): a CPU without it would run a graph planned
  // for another. This holds also where implementation names say nothing (a dynamic model's
  // kernels are prepared at run time).
  if (graph.blocked_layouts)
    for (const char* isa : {"AVX2", "AVX512"})
      if (contains(compiled_on, isa)) needed.insert(isa);
  for (std::string impl : graph.implementations) {
    for (auto& ch : impl) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (impl.find("amx") != std::string::npos) needed.insert("AMX");
    if (impl.find("avx512") != std::string::npos) needed.insert("AVX512");
    if (impl.find("avx2") != std::string::npos) needed.insert("AVX2");
    if (impl.find("vnni") != std::string::npos) needed.insert("VNNI");
    if (impl.find("bf16") != std::string::npos) needed.insert("BF16");
  }
  return {needed.begin(), needed.end()};
}

void write_compiled_blob(std::ostream& out, const detail::CompiledGraph& graph,
                         const detail::CompileConfig& config, const std::string& device,
                         const std::vector<std::string>& cpu_capabilities) {
  if (!graph.model) throw InvalidArgument("export_model: the compiled model has no graph");
  Payload payload;
  make_payload(graph, payload);
  FingerprintBuf hashing;
  {
    std::ostream hash_stream(&hashing);
    payload.write(hash_stream);
  }
  BlobInfo info;
  info.troupe_version = TROUPE_VERSION;
  info.device = device;
  info.model_name = graph.model->name();
  info.cpu_capabilities = cpu_capabilities;
  info.required_capabilities = required_capabilities(graph, config, cpu_capabilities);
  info.config = config;
  info.payload_length = hashing.count;
  info.payload_checksum = hashing.fingerprint.digest();

  const std::string envelope = envelope_prefix_and_header(info);
  out.write(envelope.data(), static_cast<std::streamsize>(envelope.size()));
  payload.write(out);
  if (!out)
    throw InvalidArgument("export_model: the output stream failed while writing the " +
                          std::to_string(envelope.size() + info.payload_length) + "-byte blob");
}

BlobInfo read_blob_info(std::istream& in) {
  StreamSource source(in);
  uint64_t payload_offset = 0;
  return read_envelope(source, payload_offset);
}

namespace {

LoadedBlob read_blob(BlobSource& in, const std::string& device,
                     const std::vector<std::string>& host_capabilities) {
  uint64_t payload_offset = 0;
  LoadedBlob blob;
  blob.info = read_envelope(in, payload_offset);
  const BlobInfo& info = blob.info;
  if (info.troupe_version != TROUPE_VERSION)
    throw FormatError(std::string(blob_source) + " was made by troupe " +
                      (info.troupe_version.empty() ? "(unknown)" : info.troupe_version) +
                      "; this is troupe " + TROUPE_VERSION +
                      ", which imports only its own blobs: compile the model again");
  if (info.device != device)
    throw FormatError(std::string(blob_source) + " was compiled for device '" + info.device +
                      "', not '" + device + "'");
  std::vector<std::string> missing;
  for (const auto& cap : info.required_capabilities)
    if (!contains(host_capabilities, cap)) missing.push_back(cap);
  if (!missing.empty())
    throw FormatError(
        std::string(blob_source) + " of model '" + info.model_name +
        "' needs CPU capabilities this CPU lacks: " + join(missing) + " (it was compiled for " +
        std::string(troupe::to_string(info.config.inference_precision)) +
        " inference on a CPU with: " + join(info.cpu_capabilities) +
        "; this CPU has: " + join(host_capabilities) + "); compile the model on this machine");

  const PayloadBytes payload = in.take(info.payload_length, payload_offset);
  const uint64_t actual = payload.checksum;
  if (actual != info.payload_checksum)
    throw FormatError(std::string(blob_source) + ": payload checksum mismatch (stored " +
                      to_hex(info.payload_checksum) + ", computed " + to_hex(actual) +
                      " over bytes " + byte_range(payload_offset, info.payload_length) +
                      "): the blob is corrupt");
  blob.graph = graph_from_payload(payload.data, payload.owner, info.payload_length);
  blob.graph->inference_precision = info.config.inference_precision;
  return blob;
}

}  // namespace

LoadedBlob read_compiled_blob(std::istream& in, const std::string& device,
                              const std::vector<std::string>& host_capabilities) {
  StreamSource source(in);
  return read_blob(source, device, host_capabilities);
}

LoadedBlob read_compiled_blob_file(const std::string& path, const std::string& device,
                                   const std::vector<std::string>& host_capabilities) {
  MappedSource source(map_file(path, "compiled blob"));
  return read_blob(source, device, host_capabilities);
}

std::string reseal_blob(const BlobInfo& info, const std::string& payload) {
  BlobInfo copy = info;
  copy.payload_length = payload.size();
  copy.payload_checksum = fingerprint64(payload.data(), payload.size());
  return envelope_prefix_and_header(copy) + payload;
}

std::string blob_payload(const std::string& blob) {
  std::istringstream in(blob);
  StreamSource source(in);
  uint64_t payload_offset = 0;
  const BlobInfo info = read_envelope(source, payload_offset);
  return blob.substr(payload_offset);
}

}  // namespace troupe::serialization
