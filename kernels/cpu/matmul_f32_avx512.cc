// The float path's many-token kernel on AVX-512, compiled with AVX-512 flags
// (kernels/cpu/CMakeLists.txt) and called only where CPUID finds them
// (matmul.cc). Each 512-bit register holds two weight rows' 8-lane
// accumulators side by side, so an instruction advances two rows' chains;
// every lane still does DotOne's fused multiply-adds in DotOne's order, and
// each half is summed in HorizontalSum's order: the same bits as the AVX2
// kernels.
#include "kernels/cpu/matmul_f32_avx512.h"

#include <immintrin.h>

#include "kernels/cpu/simd.h"

// GCC 12 takes the "undefined" pass-through operand of 512-bit inserts for
// an uninitialized read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace kvfleet::kernels {
namespace {

// Rows 2p and 2p + 1 of the eight, values [i, i + 8) of each (i a
// multiple of 8): one load in the tile's layout.
inline __m512 RowPair(const float* tile, int64_t k, int p, int64_t i) {
  return _mm512_loadu_ps(tile + EightRowTileOffset(2 * p, k) + i / 8 * kEightRowTileChunkStride);
}

// Eight rows against T tokens: 4·T accumulators (T ≤ 6 leaves registers
// for the four row pairs and x).
template <int T>
void EightRowsTokens(const float* tile, const float* x, int64_t k, float* y, int64_t y_stride) {
  __m512 acc[4][T];
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) {
    acc[0][t] = acc[1][t] = acc[2][t] = acc[3][t] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < k; i += 8) {
    const __m512 w0 = RowPair(tile, k, 0, i), w1 = RowPair(tile, k, 1, i), w2 = RowPair(tile, k, 2, i),
                 w3 = RowPair(tile, k, 3, i);
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + t * k + i));
      acc[0][t] = _mm512_fmadd_ps(w0, xv, acc[0][t]);
      acc[1][t] = _mm512_fmadd_ps(w1, xv, acc[1][t]);
      acc[2][t] = _mm512_fmadd_ps(w2, xv, acc[2][t]);
      acc[3][t] = _mm512_fmadd_ps(w3, xv, acc[3][t]);
    }
  }
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) {
    for (int p = 0; p < 4; ++p) {
      y[t * y_stride + 2 * p] = HorizontalSum(_mm512_castps512_ps256(acc[p][t]));
      y[t * y_stride + 2 * p + 1] = HorizontalSum(_mm512_extractf32x8_ps(acc[p][t], 1));
    }
  }
}

}  // namespace

double Avx512FmaLoop(int64_t iterations) {
  __m512 a[10];
  for (int i = 0; i < 10; ++i) a[i] = _mm512_set1_ps(1.0f + 1e-7f * static_cast<float>(i));
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 10
    for (int i = 0; i < 10; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  }
  __m512 s = a[0];
  for (int i = 1; i < 10; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_reduce_add_ps(s);
}

void DotEightRowsAvx512(const float* tile, const float* x, int64_t k, int64_t m, float* y, int64_t y_stride) {
  constexpr int64_t kTokens = 6;
  int64_t t0 = 0;
  for (; t0 + kTokens <= m; t0 += kTokens) {
    EightRowsTokens<kTokens>(tile, x + t0 * k, k, y + t0 * y_stride, y_stride);
  }
  const float* xt = x + t0 * k;
  float* yt = y + t0 * y_stride;
  if (m > t0) {
    WithCount<kTokens - 1>(m - t0,
                           [&](auto tokens) { EightRowsTokens<decltype(tokens)::value>(tile, xt, k, yt, y_stride); });
  }
}

}  // namespace kvfleet::kernels
