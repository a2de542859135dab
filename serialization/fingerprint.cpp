#include "serialization/fingerprint.hpp"

#include <cstring>

namespace troupe::serialization {

namespace {

constexpr uint64_t k_mul_state = 0x9e3779b97f4a7c15ull;  // odd: multiplication is a bijection
constexpr uint64_t k_mul_word = 0xc2b2ae3d27d4eb4full;   // odd
constexpr uint64_t k_lane_init[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull,
                                     0xa4093822299f31d0ull, 0x082efa98ec4e6c89ull};

inline uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

// For a fixed word, a bijection of the state; for a fixed state, an injection of the word.
inline uint64_t mix(uint64_t state, uint64_t word) {
  state ^= word * k_mul_word;
  return rotl(state, 31) * k_mul_state;
}

inline uint64_t load_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

inline uint64_t load_word(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);  // x86 is little-endian: the same value as load_le64
  return w;
}

// Final avalanche (a bijection), so nearby inputs give unrelated digests.
inline uint64_t avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

// Hashes whole 32-byte blocks into the lanes; returns the bytes consumed.
size_t hash_blocks(uint64_t lanes[4], const unsigned char* p, size_t size) {
  uint64_t a = lanes[0], b = lanes[1], c = lanes[2], d = lanes[3];
  size_t done = 0;
  for (; size - done >= 32; done += 32) {
    a = mix(a, load_word(p + done));
    b = mix(b, load_word(p + done + 8));
    c = mix(c, load_word(p + done + 16));
    d = mix(d, load_word(p + done + 24));
  }
  lanes[0] = a, lanes[1] = b, lanes[2] = c, lanes[3] = d;
  return done;
}

}  // namespace

Fingerprint64::Fingerprint64(uint64_t seed) : seed_(seed) {
  for (int i = 0; i < 4; ++i) lanes_[i] = seed ^ k_lane_init[i];
}

Fingerprint64& Fingerprint64::update(const void* data, size_t size) {
  if (size == 0) return *this;
  const auto* p = static_cast<const unsigned char*>(data);
  length_ += size;
  if (pending_size_ > 0) {
    const size_t take = std::min(size, block - pending_size_);
    std::memcpy(pending_ + pending_size_, p, take);
    pending_size_ += take;
    p += take;
    size -= take;
    if (pending_size_ < block) return *this;
    hash_blocks(lanes_, pending_, block);
    pending_size_ = 0;
  }
  const size_t done = hash_blocks(lanes_, p, size);
  std::memcpy(pending_, p + done, size - done);
  pending_size_ = size - done;
  return *this;
}

Fingerprint64& Fingerprint64::update_u64(uint64_t value) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  return update(bytes, 8);
}

Fingerprint64& Fingerprint64::update_field(const std::string& text) {
  update_u64(text.size());
  return update(text.data(), text.size());
}

uint64_t Fingerprint64::digest() const {
  uint64_t lanes[4] = {lanes_[0], lanes_[1], lanes_[2], lanes_[3]};
  // The last partial block: whole words to lanes 0.., then the zero-padded rest to the next lane.
  size_t lane = 0;
  size_t i = 0;
  for (; i + 8 <= pending_size_; i += 8)
    lanes[lane] = mix(lanes[lane], load_le64(pending_ + i)), ++lane;
  if (i < pending_size_) {
    unsigned char tail[8] = {};
    std::memcpy(tail, pending_ + i, pending_size_ - i);
    lanes[lane] = mix(lanes[lane], load_le64(tail));
  }
  uint64_t h = seed_ ^ 0x452821e638d01377ull;
  for (uint64_t l : lanes) h = mix(h, l);
  // The length separates inputs that differ only by trailing zero bytes.
  h = mix(h, length_);
  return avalanche(h);
}

uint64_t fingerprint64(const void* data, size_t size, uint64_t seed) {
  return Fingerprint64(seed).update(data, size).digest();
}

std::string to_hex(uint64_t value) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) s[static_cast<size_t>(i)] = digits[value & 15];
  return s;
}

}  // namespace troupe::serialization
