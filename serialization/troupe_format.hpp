#pragma once

// troupe's own model format (.troupe). Layout, all integers little-endian:
//
//   offset  size  field
//        0     8  magic "TROUPEMD"
//        8     4  format version (troupe_format_version)
//       12     4  header length (64 in version 1; the graph starts at or after it)
//       16     8  graph offset
//       24     8  graph length: a serialized troupe.proto.Graph (serialization/troupe_model.proto)
//       32     8  graph checksum: fingerprint64 of the graph bytes
//       40     8  weights offset (a multiple of 64)
//       48     8  weights length
//       56     8  reserved (0)
//
// The weights section holds every tensor's raw bytes in 64-byte-aligned segments the graph refers
// to by (offset, length) from the section's start. Keeping them out of the protobuf message lifts
// protobuf's 2 GB limit and lets the reader map the file and use the weights in place. The graph is
// checksummed; the weights are not, so that opening a large model does not read all of it.

#include <cstdint>
#include <memory>
#include <string>

#include "troupe/model.hpp"

namespace troupe::serialization {

inline constexpr char troupe_format_magic[9] = "TROUPEMD";
inline constexpr uint32_t troupe_format_version = 1;
inline constexpr uint32_t troupe_format_header_length = 64;

/// Writes `model` to `path` (through a temporary file renamed into place, so readers never see a
/// partial file). Throws InvalidArgument naming the path when it cannot be written.
void save_model(const Model& model, const std::string& path);

/// Reads a .troupe file, mapping it into memory when possible (constants then point into the
/// mapping, which stays alive as long as any of them). Throws FormatError naming the path and what
/// is wrong: magic, newer format version, truncated at byte N, checksum mismatch, inconsistent
/// graph.
std::shared_ptr<Model> read_troupe_model(const std::string& path);

}  // namespace troupe::serialization
