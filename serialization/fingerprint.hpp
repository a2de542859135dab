#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe::serialization {

/// A 64-bit non-cryptographic hash of a byte stream, used as the checksum of compiled blobs and
/// .troupe graphs and as the model cache key. Input is consumed as little-endian 64-bit words,
/// word i of each 32-byte block into lane i (four independent chains, so hashing runs at memory
/// speed); every step is a bijection of its lane, so any change confined to one 8-byte word (every
/// single-byte corruption) always changes the result. Streaming: update() in any chunking gives the
/// same value as one update() over the concatenation.
class Fingerprint64 {
 public:
  explicit Fingerprint64(uint64_t seed = 0);

  Fingerprint64& update(const void* data, size_t size);
  /// Adds a length-prefixed string, so that ("ab", "c") and ("a", "bc") differ.
  Fingerprint64& update_field(const std::string& text);
  Fingerprint64& update_u64(uint64_t value);

  /// The hash of everything added so far (the object stays usable).
  uint64_t digest() const;

 private:
  static constexpr size_t block = 32;
  uint64_t lanes_[4];
  uint64_t seed_;
  uint64_t length_ = 0;
  unsigned char pending_[block] = {};
  size_t pending_size_ = 0;
};

/// Fingerprint64 of one buffer.
uint64_t fingerprint64(const void* data, size_t size, uint64_t seed = 0);

/// 16 lower-case hex digits.
std::string to_hex(uint64_t value);

}  // namespace troupe::serialization
