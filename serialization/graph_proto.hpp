#pragma once

// Conversion between the Model IR and troupe.proto.Graph (serialization/troupe_model.proto), shared
// by the .troupe model format and the compiled blob. Tensor bytes never enter the message: they go
// to a weights section of 64-byte-aligned segments that the message refers to.

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "serialization/troupe_model.pb.h"
#include "troupe/model.hpp"

namespace troupe::serialization {

/// Alignment of every weight segment (and of the weights section inside its file or payload).
inline constexpr uint64_t weight_alignment = 64;

/// Collects tensors into a weights section while a graph is converted.
class WeightsWriter {
 public:
  /// Describes `tensor` in `out` and reserves its segment. Tensors sharing memory share a segment.
  void add(const Tensor& tensor, proto::Tensor& out);
  /// Bytes of the section (a multiple of weight_alignment).
  uint64_t size() const { return size_; }
  /// Writes the section: each segment at its offset, zeros between.
  void write(std::ostream& out) const;

 private:
  struct Entry {
    Tensor tensor;  // dense; keeps the memory alive until written
    uint64_t offset;
  };
  std::vector<Entry> entries_;
  std::map<std::pair<const void*, uint64_t>, uint64_t> offset_by_memory_;
  uint64_t size_ = 0;
};

/// A weights section in memory. `owner` keeps `data` alive (a file mapping or a buffer); tensors
/// read from the section share it instead of copying when their segment is aligned.
struct WeightsView {
  const unsigned char* data = nullptr;
  uint64_t size = 0;
  std::shared_ptr<void> owner;
};

void to_proto(const Model& model, proto::Graph& out, WeightsWriter& weights);
void to_proto(const Attributes& attributes,
              google::protobuf::RepeatedPtrField<proto::Attribute>& out, WeightsWriter& weights);

/// Rebuilds a model (not yet validated). Throws FormatError naming `source` and the offending
/// value/node/attribute when the message is inconsistent (ids out of range, a segment outside the
/// section, a tensor whose byte length does not match its type and dims, ...).
std::shared_ptr<Model> from_proto(const proto::Graph& graph, const WeightsView& weights,
                                  const std::string& source);
Attributes from_proto(const google::protobuf::RepeatedPtrField<proto::Attribute>& attributes,
                      const WeightsView& weights, const std::string& where);

/// Validates a model read from `source`: a model that does not validate means the file is corrupt
/// or was written by an incompatible troupe, so ModelError becomes FormatError naming the source
/// (UnsupportedOperation stays what it is, with the source added).
void validate_loaded(Model& model, const std::string& source);

proto::ElementType to_proto(ElementType type);
/// Throws FormatError naming `where` for a value this troupe does not know.
ElementType from_proto(int type, const std::string& where);

}  // namespace troupe::serialization
