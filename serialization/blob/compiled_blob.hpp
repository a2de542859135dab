#pragma once

// The compiled blob: what CompiledModel::export_model writes and Core::import_model reads.
// Envelope, integers little-endian:
//
//   offset  size  field
//        0     8  magic "TROUPEBL"
//        8     4  format version (compiled_blob_format_version)
//       12     4  header length H
//       16     8  header checksum: fingerprint64 of the H header bytes
//       24     H  header: a troupe.proto.BlobHeader (serialization/compiled_blob.proto) naming the
//                 troupe version, device, CPU capabilities compiled on and required, the compile
//                 configuration, the payload length P and the payload checksum
//   24 + H        zeros up to O = the next multiple of 64 (so the payload and the weights in it
//                 are 64-byte aligned in a mapped blob file, where they are used in place)
//        O     P  payload:
//                   8 bytes  length G of the graph message
//                   G bytes  a troupe.proto.CompiledGraph
//                   zeros up to a multiple of 64 (from the payload's start)
//                   the weights section (64-byte-aligned segments the graph refers to)
//
// Import checks the fields in that order and throws FormatError naming the first mismatch.

#include <cstdint>
#include <istream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/graph/compile_config.hpp"
#include "engine/graph/compiled_graph.hpp"
#include "troupe/any.hpp"

namespace troupe::serialization {

inline constexpr char compiled_blob_magic[9] = "TROUPEBL";
inline constexpr uint32_t compiled_blob_format_version = 1;
/// Bytes before the header message.
inline constexpr uint64_t compiled_blob_prefix_length = 24;

/// The envelope of a blob, as stored.
struct BlobInfo {
  uint32_t format_version = compiled_blob_format_version;
  std::string troupe_version;
  std::string device;
  std::string model_name;
  std::vector<std::string> cpu_capabilities;
  std::vector<std::string> required_capabilities;
  detail::CompileConfig config;
  uint64_t payload_length = 0;
  uint64_t payload_checksum = 0;
};

/// A blob read back.
struct LoadedBlob {
  std::shared_ptr<detail::CompiledGraph> graph;
  BlobInfo info;
};

/// What running `graph` compiled with `config` needs from the CPU, in
/// detail::CpuPlugin::capabilities() terms: BF16 (and AMX when the compiling CPU had it) for bf16
/// inference, the compiling CPU's AVX2/AVX512 when the graph's fusions and layouts were planned
/// for it, and whatever ISA the chosen kernel implementations name (avx2, avx512, vnni, amx,
/// bf16).
std::vector<std::string> required_capabilities(const detail::CompiledGraph& graph,
                                               const detail::CompileConfig& config,
                                               const std::vector<std::string>& compiled_on);

/// Writes the blob of `graph`. Throws InvalidArgument when `out` fails.
void write_compiled_blob(std::ostream& out, const detail::CompiledGraph& graph,
                         const detail::CompileConfig& config, const std::string& device,
                         const std::vector<std::string>& cpu_capabilities);

/// Reads and checks a blob for `device` on a CPU with `host_capabilities`. Throws FormatError
/// naming the mismatch: wrong magic, newer format version, other troupe version, other device,
/// missing CPU capability, truncated at byte N, checksum mismatch, malformed or invalid graph.
LoadedBlob read_compiled_blob(std::istream& in, const std::string& device,
                              const std::vector<std::string>& host_capabilities);

/// read_compiled_blob of a file, mapped into memory: the weights are used in place.
LoadedBlob read_compiled_blob_file(const std::string& path, const std::string& device,
                                   const std::vector<std::string>& host_capabilities);

/// Reads only the envelope (no payload, no device/ISA/version checks). For tools and tests.
BlobInfo read_blob_info(std::istream& in);

/// Re-encodes a blob held in memory with a new header and/or payload: `info`'s fields replace the
/// stored ones; the payload length and both checksums are recomputed. For tools and tests (to make
/// a blob that claims another version or ISA, or to fuzz the payload behind a valid checksum).
std::string reseal_blob(const BlobInfo& info, const std::string& payload);

/// The payload bytes of a blob held in memory (throws FormatError when it has none).
std::string blob_payload(const std::string& blob);

}  // namespace troupe::serialization
