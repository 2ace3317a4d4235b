#include "kernels/cpu/quantize_activations.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

namespace kvfleet::kernels {
namespace {

// The scale and its inverse from a block's largest magnitude. A maximum so
// small that 127 / amax overflows quantizes the block to zeros.
inline void Scale(float amax, float* d, float* id) {
  *d = amax / 127.0f;
  const float inverse = 127.0f / amax;
  *id = amax > 0.0f && std::isfinite(inverse) ? inverse : 0.0f;
}

// A block holding a NaN or an infinity: scale NaN, values 0, so a
// non-finite result reaches every output it touches, as on the float32
// path (an infinite maximum would otherwise quantize to -128 and overflow
// Σq, outside the range the dot products rely on).
inline void PoisonBlock(BlockQ8A& q) {
  q.d = std::numeric_limits<float>::quiet_NaN();
  q.sum = 0;
  q.sum16[0] = q.sum16[1] = 0;
  q.dsum = q.d;
  std::fill(std::begin(q.qs), std::end(q.qs), int8_t{0});
}

}  // namespace

void QuantizeActivationRowReference(const float* x, int64_t k, BlockQ8A* out) {
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* v = x + 32 * b;
    if (std::any_of(v, v + 32, [](float e) { return std::isnan(e); })) {
      PoisonBlock(out[b]);
      continue;
    }
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(v[i]));
    if (!std::isfinite(amax)) {
      PoisonBlock(out[b]);
      continue;
    }
    float d, id;
    Scale(amax, &d, &id);
    BlockQ8A& q = out[b];
    q.d = d;
    q.sum16[0] = q.sum16[1] = 0;
    for (int i = 0; i < 32; ++i) {
      q.qs[i] = static_cast<int8_t>(std::nearbyint(v[i] * id));
      q.sum16[i / 16] = static_cast<int16_t>(q.sum16[i / 16] + q.qs[i]);
    }
    q.sum = q.sum16[0] + q.sum16[1];
    q.dsum = d * static_cast<float>(q.sum);
  }
}

void QuantizeActivationRow(const float* x, int64_t k, BlockQ8A* out) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* v = x + 32 * b;
    __m256 x0 = _mm256_loadu_ps(v), x1 = _mm256_loadu_ps(v + 8);
    __m256 x2 = _mm256_loadu_ps(v + 16), x3 = _mm256_loadu_ps(v + 24);
    const __m256 nan = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(x0, x0, _CMP_UNORD_Q), _mm256_cmp_ps(x1, x1, _CMP_UNORD_Q)),
                                    _mm256_or_ps(_mm256_cmp_ps(x2, x2, _CMP_UNORD_Q), _mm256_cmp_ps(x3, x3, _CMP_UNORD_Q)));
    if (_mm256_movemask_ps(nan) != 0) {
      PoisonBlock(out[b]);
      continue;
    }
    // max is exact, so its order does not matter.
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign_mask, x0), _mm256_andnot_ps(sign_mask, x1)),
                             _mm256_max_ps(_mm256_andnot_ps(sign_mask, x2), _mm256_andnot_ps(sign_mask, x3)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    if (!std::isfinite(amax)) {
      PoisonBlock(out[b]);
      continue;
    }
    float d, id;
    Scale(amax, &d, &id);
    const __m256 scale = _mm256_set1_ps(id);
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(x0, scale), kRound));
    const __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(x1, scale), kRound));
    const __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(x2, scale), kRound));
    const __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(x3, scale), kRound));
    // Σq of each half: exact in int32 whatever the order.
    const __m256i s01 = _mm256_add_epi32(i0, i1), s23 = _mm256_add_epi32(i2, i3);
    __m128i s4 = _mm_hadd_epi32(_mm_add_epi32(_mm256_castsi256_si128(s01), _mm256_extracti128_si256(s01, 1)),
                                _mm_add_epi32(_mm256_castsi256_si128(s23), _mm256_extracti128_si256(s23, 1)));
    s4 = _mm_hadd_epi32(s4, s4);  // lanes: Σ first half, Σ second half
    // Pack to int8 in element order (packs interleave 128-bit lanes; the
    // permute puts them back).
    const __m256i p16a = _mm256_packs_epi32(i0, i1), p16b = _mm256_packs_epi32(i2, i3);
    const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
    const __m256i ordered = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    BlockQ8A& q = out[b];
    q.d = d;
    q.sum16[0] = static_cast<int16_t>(_mm_cvtsi128_si32(s4));
    q.sum16[1] = static_cast<int16_t>(_mm_extract_epi32(s4, 1));
    q.sum = q.sum16[0] + q.sum16[1];
    q.dsum = d * static_cast<float>(q.sum);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q.qs), ordered);
  }
}

}  // namespace kvfleet::kernels
