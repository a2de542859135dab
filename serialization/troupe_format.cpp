#include "serialization/troupe_format.hpp"

#include <climits>
#include <cstring>

#include "serialization/byte_io.hpp"
#include "serialization/file_io.hpp"
#include "serialization/fingerprint.hpp"
#include "serialization/graph_proto.hpp"
#include "serialization/message_text.hpp"
#include "troupe/error.hpp"
#include "troupe/serialize.hpp"

namespace troupe::serialization {

void save_model(const Model& model, const std::string& path) {
  proto::Graph graph;
  WeightsWriter weights;
  to_proto(model, graph, weights);
  std::string graph_bytes;
  if (!graph.SerializeToString(&graph_bytes))
    throw InvalidArgument("cannot save model '" + model.name() + "' to '" + path +
                          "': its graph message exceeds protobuf's 2 GB limit");
  const uint64_t graph_offset = troupe_format_header_length;
  const uint64_t weights_offset = align_up(graph_offset + graph_bytes.size(), weight_alignment);

  std::string header(troupe_format_magic, 8);
  put_le(header, troupe_format_version, 4);
  put_le(header, troupe_format_header_length, 4);
  put_le(header, graph_offset, 8);
  put_le(header, graph_bytes.size(), 8);
  put_le(header, fingerprint64(graph_bytes.data(), graph_bytes.size()), 8);
  put_le(header, weights_offset, 8);
  put_le(header, weights.size(), 8);
  put_le(header, 0, 8);

  write_file_atomically(path, [&](std::ostream& out) {
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(graph_bytes.data(), static_cast<std::streamsize>(graph_bytes.size()));
    const std::string padding(weights_offset - graph_offset - graph_bytes.size(), '\0');
    out.write(padding.data(), static_cast<std::streamsize>(padding.size()));
    weights.write(out);
  });
}

std::shared_ptr<Model> read_troupe_model(const std::string& path) {
  const FileBytes file = map_file(path, "model file");
  const std::string source = "model file '" + path + "'";
  auto truncated = [&](const std::string& what, uint64_t offset, uint64_t length) {
    return FormatError(source + " is truncated at byte " + std::to_string(file.size) + ": " + what +
                       " needs bytes " + byte_range(offset, length));
  };
  const unsigned char* p = file.data;
  const size_t magic_seen = std::min<uint64_t>(file.size, 8);
  if (file.size == 0 || std::memcmp(p, troupe_format_magic, magic_seen) != 0)
    throw FormatError(
        source + " is not a troupe model: its magic is " +
        (file.size == 0 ? std::string("missing (empty file)") : describe_magic(p, magic_seen)) +
        ", expected '" + troupe_format_magic + "'");
  if (file.size < 16) throw truncated("the header", 0, 16);
  const auto version = static_cast<uint32_t>(get_le(p + 8, 4));
  const auto header_length = static_cast<uint32_t>(get_le(p + 12, 4));
  if (version > troupe_format_version)
    throw FormatError(source + " has format version " + std::to_string(version) +
                      ", newer than this troupe reads (" + std::to_string(troupe_format_version) +
                      "); upgrade troupe");
  if (version == 0) throw FormatError(source + " has invalid format version 0");
  if (header_length < troupe_format_header_length)
    throw FormatError(source + ": header length " + std::to_string(header_length) +
                      " is shorter than version 1's " +
                      std::to_string(troupe_format_header_length));
  if (file.size < header_length) throw truncated("the header", 0, header_length);

  const uint64_t graph_offset = get_le(p + 16, 8);
  const uint64_t graph_length = get_le(p + 24, 8);
  const uint64_t graph_checksum = get_le(p + 32, 8);
  const uint64_t weights_offset = get_le(p + 40, 8);
  const uint64_t weights_length = get_le(p + 48, 8);
  if (graph_offset < header_length)
    throw FormatError(source + ": graph offset " + std::to_string(graph_offset) +
                      " lies inside the header");
  if (graph_offset > file.size || graph_length > file.size - graph_offset)
    throw truncated("the graph", graph_offset, graph_length);
  if (weights_offset % weight_alignment != 0)
    throw FormatError(source + ": weights offset " + std::to_string(weights_offset) +
                      " is not a multiple of " + std::to_string(weight_alignment));
  if (weights_offset > file.size || weights_length > file.size - weights_offset)
    throw truncated("the weights section", weights_offset, weights_length);
  if (graph_length > static_cast<uint64_t>(INT_MAX))
    throw FormatError(source + ": graph message of " + std::to_string(graph_length) +
                      " bytes exceeds protobuf's 2 GB limit");
  const uint64_t actual = fingerprint64(p + graph_offset, graph_length);
  if (actual != graph_checksum)
    throw FormatError(source + ": graph checksum mismatch (stored " + to_hex(graph_checksum) +
                      ", computed " + to_hex(actual) + "): the file is corrupt");

  proto::Graph graph;
  if (!graph.ParseFromArray(p + graph_offset, static_cast<int>(graph_length)))
    throw FormatError(source + ": bytes " + byte_range(graph_offset, graph_length) +
                      " are not a valid troupe.proto.Graph message");
  const WeightsView weights{p + weights_offset, weights_length, file.owner};
  auto model = from_proto(graph, weights, source);
  validate_loaded(*model, source);
  return model;
}

}  // namespace troupe::serialization

namespace troupe {

void save_model(const std::shared_ptr<const Model>& model, const std::string& path) {
  if (!model) throw InvalidArgument("save_model: model is null");
  serialization::save_model(*model, path);
}

}  // namespace troupe
