// The integer-dot matmul's kernels, written once over an instruction-set
// policy and compiled once per policy (matmul_q8.cc: AVX2; matmul_q8_vnni.cc:
// AVX-512 VNNI). Everything here has internal linkage, so the AVX-512 copy
// can never be linked into the AVX2 path (an inline function shared by both
// translation units could be, and would fault on a CPU without AVX-512).
//
// Arithmetic, the same in every policy (the reason both give identical bits):
// per 32-value block, eight int32 lanes, lane l = Σ w[i]·x[i] over
// i = 4l .. 4l+3 (exact); then per lane acc = fma(d_w · d_x, float(lane), acc)
// block after block; then HorizontalSum's fixed order; Q4_1 adds
// Σ_b m_w · (d_x · Σq_x), accumulated in block order. A (token, weight row)
// result depends on nothing else: not on the batch, the tiling or threads.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "common/dtype.h"  // the enum only: no function from it is called here
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quantize_activations.h"

namespace kvfleet::kernels {
namespace {  // NOLINT: one copy per instruction set, on purpose

inline float Q8HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

// ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)), as simd.h's HorizontalSum.
inline float Q8HorizontalSum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One weight block as the dot product wants it: `u` unsigned bytes and, for
// signed formats, the signs to move onto x (u8 × s8 is what the
// instructions multiply).
struct Q8Weights {
  __m256i u;      // |w| (signed formats) or q (Q4_1)
  __m256i signs;  // w itself (signed formats); unused for Q4_1
  float d;        // the block's scale
  float m;        // Q4_1's minimum
};

template <DType T>
constexpr int64_t Q8BlockBytes() {
  if constexpr (T == DType::kQ8_0) return sizeof(BlockQ8_0);
  if constexpr (T == DType::kQ4_0) return sizeof(BlockQ4_0);
  return sizeof(BlockQ4_1);
}

template <DType T>
inline Q8Weights LoadQ8Weights(const uint8_t* row, int64_t b) {
  if constexpr (T == DType::kQ8_0) {
    const BlockQ8_0& q = reinterpret_cast<const BlockQ8_0*>(row)[b];
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.qs));
    return {_mm256_sign_epi8(w, w), w, Q8HalfToFloat(q.d), 0.0f};
  } else {
    const uint8_t* qs;
    float d, m = 0.0f;
    if constexpr (T == DType::kQ4_0) {
      const BlockQ4_0& q = reinterpret_cast<const BlockQ4_0*>(row)[b];
      qs = q.qs;
      d = Q8HalfToFloat(q.d);
    } else {
      const BlockQ4_1& q = reinterpret_cast<const BlockQ4_1*>(row)[b];
      qs = q.qs;
      d = Q8HalfToFloat(q.d);
      m = Q8HalfToFloat(q.m);
    }
    // Elements 0–15 are the low nibbles, 16–31 the high ones.
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m128i low4 = _mm_set1_epi8(0x0F);
    const __m256i nibbles = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), low4), _mm_and_si128(packed, low4));
    if constexpr (T == DType::kQ4_0) {
      const __m256i w = _mm256_sub_epi8(nibbles, _mm256_set1_epi8(8));  // [-8, 7]
      return {_mm256_sign_epi8(w, w), w, d, 0.0f};
    } else {
      return {nibbles, nibbles, d, m};
    }
  }
}

// Dot is the policy: Lanes(u8, s8) = the eight int32 lanes of one block.
template <class Dot, DType T>
inline __m256i BlockLanes(const Q8Weights& w, const BlockQ8A& x) {
  const __m256i xs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs));
  if constexpr (T == DType::kQ4_1) {
    return Dot::Lanes(w.u, xs);
  } else {
    return Dot::Lanes(w.u, _mm256_sign_epi8(xs, w.signs));
  }
}

// acc and the Q4_1 offset after one block.
template <class Dot, DType T>
inline void AccumulateBlock(const Q8Weights& w, const BlockQ8A& x, __m256& acc, float& offset) {
  const __m256 lanes = _mm256_cvtepi32_ps(BlockLanes<Dot, T>(w, x));
  acc = _mm256_fmadd_ps(_mm256_set1_ps(w.d * x.d), lanes, acc);
  if constexpr (T == DType::kQ4_1) offset = offset + w.m * x.dsum;
}

// y[j] for four consecutive weight rows and one token (decode).
template <class Dot, DType T>
inline void Q8FourRowsOneToken(const uint8_t* w, int64_t row_bytes, const BlockQ8A* x, int64_t blocks, float* y) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  float o0 = 0.0f, o1 = 0.0f, o2 = 0.0f, o3 = 0.0f;
  const uint8_t* r1 = w + row_bytes;
  const uint8_t* r2 = r1 + row_bytes;
  const uint8_t* r3 = r2 + row_bytes;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t ahead = b * Q8BlockBytes<T>() + 1024;
    _mm_prefetch(reinterpret_cast<const char*>(w + ahead), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(r1 + ahead), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(r2 + ahead), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(r3 + ahead), _MM_HINT_T0);
    AccumulateBlock<Dot, T>(LoadQ8Weights<T>(w, b), x[b], a0, o0);
    AccumulateBlock<Dot, T>(LoadQ8Weights<T>(r1, b), x[b], a1, o1);
    AccumulateBlock<Dot, T>(LoadQ8Weights<T>(r2, b), x[b], a2, o2);
    AccumulateBlock<Dot, T>(LoadQ8Weights<T>(r3, b), x[b], a3, o3);
  }
  y[0] = Q8HorizontalSum(a0) + o0;
  y[1] = Q8HorizontalSum(a1) + o1;
  y[2] = Q8HorizontalSum(a2) + o2;
  y[3] = Q8HorizontalSum(a3) + o3;
}

// y[r · y_stride] for one weight row and R tokens: each weight block is
// loaded once for all R.
template <class Dot, DType T, int R>
inline void Q8OneRowTokens(const uint8_t* w_row, const BlockQ8A* x, int64_t blocks, float* y, int64_t y_stride) {
  __m256 acc[R];
  float offset[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    offset[r] = 0.0f;
  }
  for (int64_t b = 0; b < blocks; ++b) {
    _mm_prefetch(reinterpret_cast<const char*>(w_row + b * Q8BlockBytes<T>() + 1024), _MM_HINT_T0);
    const Q8Weights wb = LoadQ8Weights<T>(w_row, b);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) AccumulateBlock<Dot, T>(wb, x[r * blocks + b], acc[r], offset[r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) y[r * y_stride] = Q8HorizontalSum(acc[r]) + offset[r];
}

// A 2 weight rows × 4 tokens tile (prefill, verify chunks): every weight
// block loaded once for four tokens, every token block once for two rows;
// eight accumulators, each walking the blocks exactly as the others do.
template <class Dot, DType T>
inline void Q8TwoRowsFourTokens(const uint8_t* w0, const uint8_t* w1, const BlockQ8A* x, int64_t blocks, float* y,
                                int64_t y_stride) {
  __m256 a00 = _mm256_setzero_ps(), a01 = _mm256_setzero_ps(), a02 = _mm256_setzero_ps(), a03 = _mm256_setzero_ps();
  __m256 a10 = _mm256_setzero_ps(), a11 = _mm256_setzero_ps(), a12 = _mm256_setzero_ps(), a13 = _mm256_setzero_ps();
  float o00 = 0, o01 = 0, o02 = 0, o03 = 0, o10 = 0, o11 = 0, o12 = 0, o13 = 0;
  const BlockQ8A* x1 = x + blocks;
  const BlockQ8A* x2 = x1 + blocks;
  const BlockQ8A* x3 = x2 + blocks;
  for (int64_t b = 0; b < blocks; ++b) {
    _mm_prefetch(reinterpret_cast<const char*>(w0 + b * Q8BlockBytes<T>() + 1024), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(w1 + b * Q8BlockBytes<T>() + 1024), _MM_HINT_T0);
    const Q8Weights u = LoadQ8Weights<T>(w0, b);
    const Q8Weights v = LoadQ8Weights<T>(w1, b);
    AccumulateBlock<Dot, T>(u, x[b], a00, o00);
    AccumulateBlock<Dot, T>(v, x[b], a10, o10);
    AccumulateBlock<Dot, T>(u, x1[b], a01, o01);
    AccumulateBlock<Dot, T>(v, x1[b], a11, o11);
    AccumulateBlock<Dot, T>(u, x2[b], a02, o02);
    AccumulateBlock<Dot, T>(v, x2[b], a12, o12);
    AccumulateBlock<Dot, T>(u, x3[b], a03, o03);
    AccumulateBlock<Dot, T>(v, x3[b], a13, o13);
  }
  y[0] = Q8HorizontalSum(a00) + o00;
  y[1] = Q8HorizontalSum(a10) + o10;
  y[y_stride] = Q8HorizontalSum(a01) + o01;
  y[y_stride + 1] = Q8HorizontalSum(a11) + o11;
  y[2 * y_stride] = Q8HorizontalSum(a02) + o02;
  y[2 * y_stride + 1] = Q8HorizontalSum(a12) + o12;
  y[3 * y_stride] = Q8HorizontalSum(a03) + o03;
  y[3 * y_stride + 1] = Q8HorizontalSum(a13) + o13;
}

// Rows [row_begin, row_end) of y = x · Wᵀ from the quantized tokens xq
// ([m][k / 32] blocks).
template <class Dot, DType T>
void Q8MatMulRows(const uint8_t* w, int64_t n, int64_t k, const BlockQ8A* xq, int64_t m, float* y, int64_t row_begin,
                  int64_t row_end) {
  const int64_t blocks = k / 32;
  const int64_t row_bytes = blocks * Q8BlockBytes<T>();
  int64_t j = row_begin;
  if (m == 1) {
    for (; j + 4 <= row_end; j += 4) Q8FourRowsOneToken<Dot, T>(w + j * row_bytes, row_bytes, xq, blocks, y + j);
  } else if (m >= 4) {
    // Pairs of rows over every whole group of four tokens; the tokens left
    // over go through the one-row kernel below.
    const int64_t quads = m / 4 * 4;
    for (; j + 2 <= row_end; j += 2) {
      for (int64_t i0 = 0; i0 < quads; i0 += 4) {
        Q8TwoRowsFourTokens<Dot, T>(w + j * row_bytes, w + (j + 1) * row_bytes, xq + i0 * blocks, blocks,
                                    y + i0 * n + j, n);
      }
      for (int64_t r = j; r < j + 2; ++r) {
        for (int64_t i0 = quads; i0 < m; ++i0) {
          Q8OneRowTokens<Dot, T, 1>(w + r * row_bytes, xq + i0 * blocks, blocks, y + i0 * n + r, n);
        }
      }
    }
  }
  constexpr int64_t kTokens = 8;
  for (; j < row_end; ++j) {
    const uint8_t* row = w + j * row_bytes;
    for (int64_t i0 = 0; i0 < m; i0 += kTokens) {
      const BlockQ8A* x = xq + i0 * blocks;
      float* out = y + i0 * n + j;
      switch (m - i0 < kTokens ? m - i0 : kTokens) {
        case 1: Q8OneRowTokens<Dot, T, 1>(row, x, blocks, out, n); break;
        case 2: Q8OneRowTokens<Dot, T, 2>(row, x, blocks, out, n); break;
        case 3: Q8OneRowTokens<Dot, T, 3>(row, x, blocks, out, n); break;
        case 4: Q8OneRowTokens<Dot, T, 4>(row, x, blocks, out, n); break;
        case 5: Q8OneRowTokens<Dot, T, 5>(row, x, blocks, out, n); break;
        case 6: Q8OneRowTokens<Dot, T, 6>(row, x, blocks, out, n); break;
        case 7: Q8OneRowTokens<Dot, T, 7>(row, x, blocks, out, n); break;
        default: Q8OneRowTokens<Dot, T, 8>(row, x, blocks, out, n); break;
      }
    }
  }
}

template <class Dot>
void Q8MatMulRowsFor(DType w_type, const void* w, int64_t n, int64_t k, const BlockQ8A* xq, int64_t m, float* y,
                     int64_t row_begin, int64_t row_end) {
  const auto* bytes = static_cast<const uint8_t*>(w);
  switch (w_type) {
    case DType::kQ8_0: return Q8MatMulRows<Dot, DType::kQ8_0>(bytes, n, k, xq, m, y, row_begin, row_end);
    case DType::kQ4_0: return Q8MatMulRows<Dot, DType::kQ4_0>(bytes, n, k, xq, m, y, row_begin, row_end);
    case DType::kQ4_1: return Q8MatMulRows<Dot, DType::kQ4_1>(bytes, n, k, xq, m, y, row_begin, row_end);
    default: return;
  }
}

}  // namespace
}  // namespace kvfleet::kernels
