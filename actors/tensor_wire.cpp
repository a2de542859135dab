// The wire form of a Tensor for CAF's serializers: element type (one byte), rank, dimensions,
// byte count, then the dense row-major bytes (a string tensor: the total length of its strings,
// then each string as CAF writes strings). The receiving side checks every field against the
// others and against wire::max_rank / max_tensor_bytes (and, from the middleman's buffer, the
// bytes actually left) before it allocates: a peer cannot make this node allocate more than it
// sent.

#include <caf/binary_deserializer.hpp>

#include "troupe/actor_protocol.hpp"

namespace troupe::wire {

namespace {

caf::error refused(std::string what) {
  return make_actor_error(ActorErrc::invalid_input, "malformed tensor from the wire: " + what);
}

// The last enumerator: new element types are appended to the enum, so every code up to it is one.
bool known_type(uint8_t code) {
  return code <= static_cast<uint8_t>(ElementType::string);
}

// Each string costs at least one byte of the message (its length), and the text is bounded like
// any tensor's bytes, so a peer cannot make this node allocate more than it sent.
caf::error load_strings(caf::deserializer& source, const Shape& shape, uint64_t text_bytes,
                        Tensor& tensor) {
  const auto elements = static_cast<uint64_t>(shape.element_count());
  if (text_bytes > max_tensor_bytes || elements > max_tensor_bytes / sizeof(std::string))
    return refused("string tensor " + shape.to_string() + " of " + std::to_string(text_bytes) +
                   " bytes exceeds " + std::to_string(max_tensor_bytes) + " bytes");
  if (auto* buffer = dynamic_cast<caf::binary_deserializer*>(&source))
    if (elements > buffer->remaining() || text_bytes > buffer->remaining())
      return refused("string tensor " + shape.to_string() + " of " + std::to_string(text_bytes) +
                     " bytes announced, " + std::to_string(buffer->remaining()) +
                     " bytes in the message");
  Tensor loaded(ElementType::string, shape);
  std::string* strings = loaded.data<std::string>();
  uint64_t read = 0;
  for (uint64_t i = 0; i < elements; ++i) {
    if (auto err = source(strings[i])) return err;
    read += strings[i].size();
    if (read > text_bytes) break;
  }
  if (read != text_bytes)
    return refused("string tensor " + shape.to_string() + " announced " +
                   std::to_string(text_bytes) + " bytes of text and holds " +
                   (read > text_bytes ? "more" : std::to_string(read)));
  tensor = std::move(loaded);
  return caf::none;
}

}  // namespace

caf::error save_tensor(caf::serializer& sink, const Tensor& tensor) {
  const Tensor dense = tensor.contiguous();
  uint8_t type = static_cast<uint8_t>(dense.element_type());
  uint32_t rank = static_cast<uint32_t>(dense.empty() ? 0 : dense.shape().rank());
  if (auto err = sink(type, rank)) return err;
  for (uint32_t d = 0; d < rank; ++d) {
    int64_t dim = dense.shape()[d];
    if (auto err = sink(dim)) return err;
  }
  if (dense.element_type() == ElementType::string) {
    const std::string* strings = dense.data<std::string>();
    uint64_t text_bytes = 0;
    for (int64_t i = 0; i < dense.size(); ++i) text_bytes += strings[i].size();
    if (auto err = sink(text_bytes)) return err;
    for (int64_t i = 0; i < dense.size(); ++i)
      if (auto err = sink(const_cast<std::string&>(strings[i]))) return err;
    return caf::none;
  }
  uint64_t bytes = dense.empty() ? 0 : dense.byte_size();
  if (auto err = sink(bytes)) return err;
  if (bytes == 0) return caf::none;
  return sink.apply_raw(bytes, const_cast<void*>(dense.raw_data()));
}

caf::error load_tensor(caf::deserializer& source, Tensor& tensor) {
  uint8_t type = 0;
  uint32_t rank = 0;
  if (auto err = source(type, rank)) return err;
  if (!known_type(type)) return refused("unknown element type code " + std::to_string(type));
  if (rank > max_rank)
    return refused("rank " + std::to_string(rank) + " exceeds " + std::to_string(max_rank));
  std::vector<int64_t> dims(rank);
  uint64_t elements = 1;
  for (uint32_t d = 0; d < rank; ++d) {
    if (auto err = source(dims[d])) return err;
    if (dims[d] < 0) return refused("dimension " + std::to_string(d) + " is negative");
    // Checked against the limit as it grows, so the product cannot overflow.
    if (dims[d] > 0 && elements > max_tensor_bytes / static_cast<uint64_t>(dims[d]))
      return refused("shape exceeds " + std::to_string(max_tensor_bytes) + " elements");
    elements *= static_cast<uint64_t>(dims[d]);
  }
  uint64_t bytes = 0;
  if (auto err = source(bytes)) return err;
  const auto element_type = static_cast<ElementType>(type);
  if (element_type == ElementType::undefined) {
    if (rank != 0 || bytes != 0) return refused("an empty tensor with a shape or bytes");
    tensor = Tensor();
    return caf::none;
  }
  if (element_type == ElementType::string) return load_strings(source, Shape(dims), bytes, tensor);
  const uint64_t expected = elements * element_size(element_type);
  if (bytes != expected)
    return refused(std::to_string(bytes) + " bytes for shape " + Shape(dims).to_string() + " of " +
                   std::string(to_string(element_type)) + " (" + std::to_string(expected) +
                   " expected)");
  if (bytes > max_tensor_bytes)
    return refused(std::to_string(bytes) + " bytes exceed " + std::to_string(max_tensor_bytes));
  if (auto* buffer = dynamic_cast<caf::binary_deserializer*>(&source))
    if (bytes > buffer->remaining())
      return refused(std::to_string(bytes) + " bytes announced, " +
                     std::to_string(buffer->remaining()) + " in the message");
  Tensor loaded(element_type, Shape(dims));
  if (bytes > 0)
    if (auto err = source.apply_raw(bytes, loaded.raw_data())) return err;
  tensor = std::move(loaded);
  return caf::none;
}

std::string describe_tensor(const Tensor& tensor) {
  if (tensor.empty()) return "empty";
  return std::string(to_string(tensor.element_type())) + tensor.shape().to_string();
}

}  // namespace troupe::wire
