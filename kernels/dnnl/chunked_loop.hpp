// Element-wise loops of troupe's own kernels, cut into chunks that the stream's threads share.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/dnnl/team.hpp"

namespace troupe::kernels::onednn {

/// Calls body(begin, count) for consecutive chunks of [0, n) of `chunk` elements (the last one
/// shorter), spread over the calling thread's OpenMP team when there are more than four chunks
/// (fewer do not pay for the parallel region's start).
template <class Body>
void for_each_chunk(int64_t n, int64_t chunk, const Body& body) {
  const int64_t chunks = (n + chunk - 1) / chunk;
  for_each_index_if(chunks > 4, chunks, [&](int64_t c) {
    const int64_t begin = c * chunk;
    body(begin, std::min(chunk, n - begin));
  });
}

/// Elements per chunk of the element-wise loops (int8 sums, quantization, normalization): enough
/// that a chunk outweighs its share of the parallel region's start.
inline constexpr int64_t elementwise_chunk = 16384;

/// for_each_chunk over `units` units of `unit_elements` elements each (an image's block of 16
/// channels, a pixel's row of channels): chunks of whole units, about elementwise_chunk elements.
template <class Body>
void for_each_chunk_of_units(int64_t units, int64_t unit_elements, const Body& body) {
  for_each_chunk(
      units, std::max<int64_t>(1, elementwise_chunk / std::max<int64_t>(1, unit_elements)), body);
}

}  // namespace troupe::kernels::onednn
