// The integer-dot matmul's kernels, written once over an instruction-set
// policy and compiled once per policy (matmul_q8.cc: AVX2; matmul_q8_vnni.cc:
// AVX-512 VNNI). Everything here has internal linkage, so the AVX-512 copy
// can never be linked into the AVX2 path (an inline function shared by both
// translation units could be, and would fault on a CPU without AVX-512).
//
// The weights are panels of 8 rows (q8_panels.h); a register's 8 lanes are
// the panel's 8 output features. Arithmetic, the same in every policy (the
// reason both give identical bits), for each (token, weight row):
//   per block, dot = Σ u[i] · x[i] over its 32 values, exact in int32, with
//     u the unsigned nibble (Q4_0, Q4_1) or |w| against x with w's sign
//     (Q8_0); Q4_0 then subtracts 8 · Σx (its nibbles are q + 8);
//   acc = fma(d_w · d_x, float(dot), acc), block after block;
//   Q4_1: offset = fma(m_w, d_x · Σx, offset) block after block, y = acc + offset.
// A (token, weight row) result depends on nothing else: not on the batch,
// the tiling or the threads. DotQ8Reference (matmul_q8.cc) is the scalar
// definition.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "common/dtype.h"  // the enum only: no function from it is called here
#include "kernels/cpu/quantize_activations.h"

namespace kvfleet::kernels {
namespace {  // NOLINT: one copy per instruction set, on purpose

template <DType T>
constexpr int64_t PanelQsBytes() {
  return T == DType::kQ8_0 ? 256 : 128;
}
template <DType T>
constexpr int64_t PanelBlockBytes() {
  return T == DType::kQ8_0 ? 272 : (T == DType::kQ4_0 ? 144 : 160);
}

// How far ahead of the panel block in use to prefetch: decode reads every
// weight once, and a 4 KiB lead measured 1.1-1.2x the decode rate of 1 KiB
// (2 threads, SmolLM2-135M Q4_1).
constexpr int64_t kPanelPrefetchBytes = 4096;

// Four bytes of x (one group of a block), in every 32-bit lane.
inline __m256i BroadcastGroup(const int8_t* qs) {
  int32_t v;
  std::memcpy(&v, qs, 4);
  return _mm256_set1_epi32(v);
}

// TOK tokens against one panel: y[t · y_stride + r] for the panel's rows r
// below `rows` (8 but in the last panel). x[t · x_stride + b] is token t's
// block b.
template <class Dot, DType T, int TOK>
inline void PanelTokens(const uint8_t* panel, int64_t blocks, const BlockQ8A* x, int64_t x_stride, float* y,
                        int64_t y_stride, int rows) {
  __m256 acc[TOK], offset[TOK];
#pragma GCC unroll 8
  for (int t = 0; t < TOK; ++t) acc[t] = offset[t] = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* pb = panel + b * PanelBlockBytes<T>();
    _mm_prefetch(reinterpret_cast<const char*>(pb + kPanelPrefetchBytes), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(pb + kPanelPrefetchBytes + 64), _MM_HINT_T0);
    __m256i dot[TOK];
#pragma GCC unroll 8
    for (int t = 0; t < TOK; ++t) dot[t] = _mm256_setzero_si256();
    if constexpr (T == DType::kQ8_0) {
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 32 * g));
        const __m256i u = _mm256_sign_epi8(w, w);
#pragma GCC unroll 8
        for (int t = 0; t < TOK; ++t) {
          dot[t] = Dot::Accumulate(dot[t], u, _mm256_sign_epi8(BroadcastGroup(x[t * x_stride + b].qs + 4 * g), w));
        }
      }
    } else {
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 32 * c));
        const __m256i lo = _mm256_and_si256(v, low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
#pragma GCC unroll 8
        for (int t = 0; t < TOK; ++t) {
          const int8_t* qs = x[t * x_stride + b].qs + 8 * c;
          dot[t] = Dot::Accumulate(dot[t], lo, BroadcastGroup(qs));
          dot[t] = Dot::Accumulate(dot[t], hi, BroadcastGroup(qs + 4));
        }
      }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + PanelQsBytes<T>())));
#pragma GCC unroll 8
    for (int t = 0; t < TOK; ++t) {
      const BlockQ8A& xb = x[t * x_stride + b];
      __m256i d = dot[t];
      if constexpr (T == DType::kQ4_0) d = _mm256_sub_epi32(d, _mm256_set1_epi32(8 * xb.sum));
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(xb.d)), _mm256_cvtepi32_ps(d), acc[t]);
    }
    if constexpr (T == DType::kQ4_1) {
      const __m256 mw =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + PanelQsBytes<T>() + 16)));
#pragma GCC unroll 8
      for (int t = 0; t < TOK; ++t) offset[t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(x[t * x_stride + b].dsum), offset[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < TOK; ++t) {
    const __m256 out = T == DType::kQ4_1 ? _mm256_add_ps(acc[t], offset[t]) : acc[t];
    if (rows == 8) {
      _mm256_storeu_ps(y + t * y_stride, out);
    } else {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, out);
      std::memcpy(y + t * y_stride, lanes, static_cast<size_t>(rows) * sizeof(float));
    }
  }
}

// Panels [panel_begin, panel_end) of y = x · Wᵀ for the m quantized tokens
// xq ([m][k / 32] blocks): each panel stays in L1 while every group of
// Dot::kTokens tokens passes over it.
template <class Dot, DType T>
void Q8PanelRows(const uint8_t* w, int64_t n, int64_t k, const BlockQ8A* xq, int64_t m, float* y,
                 int64_t panel_begin, int64_t panel_end) {
  constexpr int kTok = Dot::kTokens;
  const int64_t blocks = k / 32;
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    const uint8_t* panel = w + p * blocks * PanelBlockBytes<T>();
    const int rows = static_cast<int>(n - 8 * p < 8 ? n - 8 * p : 8);
    for (int64_t t0 = 0; t0 < m; t0 += kTok) {
      const BlockQ8A* x = xq + t0 * blocks;
      float* out = y + t0 * n + 8 * p;
      switch (m - t0 < kTok ? m - t0 : kTok) {
        case 1: PanelTokens<Dot, T, 1>(panel, blocks, x, blocks, out, n, rows); break;
        case 2: PanelTokens<Dot, T, 2>(panel, blocks, x, blocks, out, n, rows); break;
        case 3: PanelTokens<Dot, T, 3>(panel, blocks, x, blocks, out, n, rows); break;
        case 4: PanelTokens<Dot, T, 4>(panel, blocks, x, blocks, out, n, rows); break;
        default:
          if constexpr (kTok > 4) {
            switch (m - t0 < kTok ? m - t0 : kTok) {
              case 5: PanelTokens<Dot, T, 5>(panel, blocks, x, blocks, out, n, rows); break;
              case 6: PanelTokens<Dot, T, 6>(panel, blocks, x, blocks, out, n, rows); break;
              case 7: PanelTokens<Dot, T, 7>(panel, blocks, x, blocks, out, n, rows); break;
              default: PanelTokens<Dot, T, kTok>(panel, blocks, x, blocks, out, n, rows); break;
            }
          }
          break;
      }
    }
  }
}

template <class Dot>
void Q8PanelRowsFor(DType w_type, const uint8_t* w, int64_t n, int64_t k, const BlockQ8A* xq, int64_t m, float* y,
                    int64_t panel_begin, int64_t panel_end) {
  switch (w_type) {
    case DType::kQ8_0: return Q8PanelRows<Dot, DType::kQ8_0>(w, n, k, xq, m, y, panel_begin, panel_end);
    case DType::kQ4_0: return Q8PanelRows<Dot, DType::kQ4_0>(w, n, k, xq, m, y, panel_begin, panel_end);
    case DType::kQ4_1: return Q8PanelRows<Dot, DType::kQ4_1>(w, n, k, xq, m, y, panel_begin, panel_end);
    default: return;
  }
}

}  // namespace
}  // namespace kvfleet::kernels
