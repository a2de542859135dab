#pragma once

// Sixteen lanes at a time of the f32 steps the quantized element-wise kernels (QLinearAdd,
// QLinearConcat, QuantizingBatchNormalization, QuantizeLinear and DequantizeLinear in one layout)
// take per element: DequantizeLinear's and QuantizeLinear's, the same operations in the same
// order as `quantize_scaled`, so the results are bit for bit the scalar loop's. GCC's own
// vectorization of that loop spent most of its time proving the float-to-byte conversion in range
// (mask shuffles per lane): 0.8 ns per element of QLinearAdd on Zen 4, against 0.21 ns here. Only
// for callers compiled for AVX-512 (their functions carry the same target attribute); the AVX2 and
// baseline loops stay scalar C++.
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

namespace troupe::kernels::onednn::avx512 {

#define TROUPE_AVX512_TARGET gnu::target("avx512f,avx512bw,avx512vl,avx512dq")

constexpr int64_t lanes = 16;

/// DequantizeLinear's (x - zero) * scale of 16 u8 or i8 values.
template <class X>
[[TROUPE_AVX512_TARGET, gnu::always_inline]] inline __m512 dequantize(const X* x, __m512i zero,
                                                                      __m512 scale) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
  const __m512i wide =
      std::is_same_v<X, uint8_t> ? _mm512_cvtepu8_epi32(bytes) : _mm512_cvtepi8_epi32(bytes);
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(wide, zero)), scale);
}

/// QuantizeLinear's steps after the division by the scale, as `quantize_scaled`: clamp to the
/// type's range widened by the zero point and one, round half to even (the default rounding
/// mode), add the zero point, saturate, store 16 u8 or i8 values.
struct Requantize {
  __m512 low, high;  // the clamp before rounding
  __m512i zero;

  template <class Y>
  [[TROUPE_AVX512_TARGET, gnu::always_inline]] static Requantize to(float zero_point) {
    constexpr float type_low = std::is_same_v<Y, uint8_t> ? 0.f : -128.f;
    constexpr float type_high = std::is_same_v<Y, uint8_t> ? 255.f : 127.f;
    return {_mm512_set1_ps(type_low - zero_point - 1.f),
            _mm512_set1_ps(type_high - zero_point + 1.f),
            _mm512_set1_epi32(static_cast<int32_t>(zero_point))};
  }

  template <class Y>
  [[TROUPE_AVX512_TARGET, gnu::always_inline]] void store(Y* y, __m512 q) const {
    q = _mm512_min_ps(_mm512_max_ps(q, low), high);
    const __m512i rounded =
        _mm512_cvt_roundps_epi32(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i shifted = _mm512_add_epi32(rounded, zero);
    __m128i bytes;
    if constexpr (std::is_same_v<Y, uint8_t>)
      bytes = _mm512_cvtusepi32_epi8(_mm512_max_epi32(shifted, _mm512_setzero_si512()));
    else
      bytes = _mm512_cvtsepi32_epi8(shifted);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y), bytes);
  }
};

}  // namespace troupe::kernels::onednn::avx512
