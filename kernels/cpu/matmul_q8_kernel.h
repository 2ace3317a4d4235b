// The integer-dot matmul's kernels, written once over an instruction-set
// policy and compiled once per policy (matmul_q8.cc: AVX2; matmul_q8_vnni.cc:
// AVX-512 VNNI). Everything here has internal linkage, so the AVX-512 copy
// can never be linked into the AVX2 path (an inline function shared by both
// translation units could be, and would fault on a CPU without AVX-512).
//
// The weights are panels of 8 rows (q8_panels.h); a register's 8 lanes are
// the panel's 8 output features. Arithmetic, the same in every policy (the
// reason both give identical bits), for each (token, weight row), block
// after block and, in a format with a scale per 16 values, half after half:
//   dot = Σ u[i] · x[i] over the block's (or half's) values, exact in int32,
//     with u the unsigned value (Q8_0: |w| against x with w's sign), less
//     zero · Σx for a format with a zero point (Q4_0, Q5_0, Q3_K, Q6_K);
//   acc = fma(s_w · d_x, float(dot), acc), s_w the block's (half's) scale:
//     d for the legacy formats, the float32 product d · scale for the
//     K-quants (exact: never requantized);
//   with a min: offset = fma(m_w, d_x · Σx, offset), m_w = m (Q4_1, Q5_1) or
//     −(dmin · min) (Q2_K, Q4_K, Q5_K), d_x · Σx the block's dsum or, per
//     half, d_x · float(Σx of the half); y = acc + offset.
// A (token, weight row) result depends on nothing else: not on the batch,
// the tiling or the threads. DotQ8Reference (matmul_q8.cc) is the scalar
// definition.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/dtype.h"                     // the enum and its dispatch: no function from it is called here
#include "kernels/cpu/formats/all_formats.h"  // kQ8Panels, read only at compile time here
#include "kernels/cpu/q8_panels.h"
#include "kernels/cpu/quantize_activations.h"

namespace kvfleet::kernels {
namespace {  // NOLINT: one copy per instruction set, on purpose

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

inline __m256i Load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256 HalfsToFloat(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 BytesToFloat(const uint8_t* p, bool is_signed) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepi32_ps(is_signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b));
}

// Calls f(std::integral_constant<int, Q>) for Q in [B, E): the register
// index stays a compile-time constant, so every shift is an immediate.
template <int B, int E, class F>
inline __attribute__((always_inline)) void ForEachRegister(F&& f) {
  if constexpr (B < E) {
    f(std::integral_constant<int, B>{});
    ForEachRegister<B + 1, E>(f);
  }
}

// u-register Q of a panel block (q8_panels.h): byte 4r + i is the unsigned
// value of element 4Q + i of row r.
template <DType T, int Q>
inline __attribute__((always_inline)) __m256i UnsignedValues(const uint8_t* pb) {
  constexpr Q8PanelLayout kL = kQ8Panels<T>;
  __m256i u;
  if constexpr (kL.low_bits == 4) {
    const __m256i v = Load256(pb + 32 * (Q / 2));
    u = _mm256_and_si256(Q % 2 == 0 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
  } else {
    u = _mm256_and_si256(_mm256_srli_epi16(Load256(pb + 32 * (Q / 4)), 2 * (Q % 4)), _mm256_set1_epi8(3));
  }
  if constexpr (kL.high_bits == 1) {
    const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(Load256(pb + 32 * kL.low_bits), Q), _mm256_set1_epi8(1));
    u = _mm256_or_si256(u, _mm256_slli_epi16(bit, kL.low_bits));
  } else if constexpr (kL.high_bits == 2) {
    const __m256i hv = Load256(pb + 32 * kL.low_bits + 32 * (Q / 4));
    const __m256i bits = _mm256_and_si256(_mm256_srli_epi16(hv, 2 * (Q % 4)), _mm256_set1_epi8(3));
    u = _mm256_or_si256(u, _mm256_slli_epi16(bits, kL.low_bits));
  }
  return u;
}

// How many u-registers' byte-pair sums (vpmaddubsw: u · s for two bytes,
// |s| <= 128) one int16 lane can add up without overflow: the format's
// largest unsigned value decides (4 bits: 8 registers, 5: 4, 6: 2).
template <DType T>
constexpr int Int16Registers() {
  constexpr int kMaxU = (1 << (kQ8Panels<T>.low_bits + kQ8Panels<T>.high_bits)) - 1;
  constexpr int kFit = 32767 / (2 * kMaxU * 128);
  return kFit >= 8 ? 8 : kFit;
}

// dot[t] += Σ over u-registers [B, E) of the block: integer, exact. A
// policy that widens byte products through int16 (AVX2) adds the int16
// pair sums of Int16Registers() registers before one widening, instead of
// widening each: the same exact integers with fewer instructions.
template <class Dot, DType T, int TOK, int B, int E>
inline __attribute__((always_inline)) void DotRegisters(const uint8_t* pb, const BlockQ8A* x, int64_t x_stride,
                                                        int64_t b, __m256i* dot) {
  __m256i sum16[TOK];
  ForEachRegister<B, E>([&](auto q) {
    constexpr int kQ = decltype(q)::value;
    if constexpr (kQ8Panels<T>.signed_values) {
      const __m256i w = Load256(pb + 32 * kQ);
      const __m256i u = _mm256_sign_epi8(w, w);
#pragma GCC unroll 8
      for (int t = 0; t < TOK; ++t) {
        dot[t] = Dot::Accumulate(dot[t], u, _mm256_sign_epi8(BroadcastGroup(x[t * x_stride + b].qs + 4 * kQ), w));
      }
    } else if constexpr (Dot::kWidensThroughInt16 && Int16Registers<T>() > 1) {
      constexpr int kGroup = Int16Registers<T>();
      constexpr bool kFirst = (kQ - B) % kGroup == 0;
      constexpr bool kLast = (kQ - B) % kGroup == kGroup - 1 || kQ == E - 1;
      const __m256i u = UnsignedValues<T, kQ>(pb);
#pragma GCC unroll 8
      for (int t = 0; t < TOK; ++t) {
        const __m256i pairs = _mm256_maddubs_epi16(u, BroadcastGroup(x[t * x_stride + b].qs + 4 * kQ));
        sum16[t] = kFirst ? pairs : _mm256_add_epi16(sum16[t], pairs);
        if constexpr (kLast) dot[t] = Dot::Widen(dot[t], sum16[t]);
      }
    } else {
      const __m256i u = UnsignedValues<T, kQ>(pb);
#pragma GCC unroll 8
      for (int t = 0; t < TOK; ++t) dot[t] = Dot::Accumulate(dot[t], u, BroadcastGroup(x[t * x_stride + b].qs + 4 * kQ));
    }
  });
}

// TOK tokens against one panel: y[t · y_stride + r] for the panel's rows r
// below `rows` (8 but in the last panel). x[t · x_stride + b] is token t's
// block b.
template <class Dot, DType T, int TOK>
inline void PanelTokens(const uint8_t* panel, int64_t blocks, const BlockQ8A* x, int64_t x_stride, float* y,
                        int64_t y_stride, int rows) {
  constexpr Q8PanelLayout kL = kQ8Panels<T>;
  constexpr int64_t kSuperBytes = kL.header_bytes + 8 * kL.block_bytes;
  const __m256 negate = _mm256_set1_ps(-0.0f);
  __m256 acc[TOK], offset[TOK];
#pragma GCC unroll 8
  for (int t = 0; t < TOK; ++t) acc[t] = offset[t] = _mm256_setzero_ps();
  __m256 d_super = _mm256_setzero_ps(), dmin_super = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* pb;
    if constexpr (kL.super) {
      const uint8_t* header = panel + (b / 8) * kSuperBytes;
      if (b % 8 == 0) {
        d_super = HalfsToFloat(header);
        if constexpr (kL.has_min) dmin_super = HalfsToFloat(header + 16);
      }
      pb = header + kL.header_bytes + (b % 8) * kL.block_bytes;
    } else {
      pb = panel + b * kL.block_bytes;
    }
    _mm_prefetch(reinterpret_cast<const char*>(pb + kPanelPrefetchBytes), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(pb + kPanelPrefetchBytes + 64), _MM_HINT_T0);
    if constexpr (kL.block_bytes > 128) _mm_prefetch(reinterpret_cast<const char*>(pb + kPanelPrefetchBytes + 128), _MM_HINT_T0);
    const uint8_t* scales = pb + 32 * (kL.low_bits + kL.high_bits);
    ForEachRegister<0, kL.halves>([&](auto half) {
      constexpr int kH = decltype(half)::value;
      constexpr int kPerHalf = 8 / kL.halves;
      __m256i dot[TOK];
#pragma GCC unroll 8
      for (int t = 0; t < TOK; ++t) dot[t] = _mm256_setzero_si256();
      DotRegisters<Dot, T, TOK, kH * kPerHalf, (kH + 1) * kPerHalf>(pb, x, x_stride, b, dot);
      __m256 ws, mw = _mm256_setzero_ps();
      if constexpr (!kL.super) {
        ws = HalfsToFloat(scales);
        if constexpr (kL.has_min) mw = HalfsToFloat(scales + 16);
      } else if constexpr (kL.scales == Q8Scales::kPacked4) {
        const __m128i packed = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + 8 * kH));
        const __m256i wide = _mm256_cvtepu8_epi32(packed);
        ws = _mm256_mul_ps(d_super, _mm256_cvtepi32_ps(_mm256_and_si256(wide, _mm256_set1_epi32(0x0F))));
        mw = _mm256_xor_ps(_mm256_mul_ps(dmin_super, _mm256_cvtepi32_ps(_mm256_srli_epi32(wide, 4))), negate);
      } else if constexpr (kL.scales == Q8Scales::kSigned8) {  // Q3_K, Q6_K
        ws = _mm256_mul_ps(d_super, BytesToFloat(scales + 8 * kH, true));
      } else {  // Q4_K, Q5_K
        ws = _mm256_mul_ps(d_super, BytesToFloat(scales, false));
        mw = _mm256_xor_ps(_mm256_mul_ps(dmin_super, BytesToFloat(scales + 8, false)), negate);
      }
#pragma GCC unroll 8
      for (int t = 0; t < TOK; ++t) {
        const BlockQ8A& xb = x[t * x_stride + b];
        __m256i d = dot[t];
        if constexpr (kL.zero != 0) {
          const int32_t sum = kL.halves == 2 ? xb.sum16[kH] : xb.sum;
          d = _mm256_sub_epi32(d, _mm256_set1_epi32(kL.zero * sum));
        }
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(ws, _mm256_set1_ps(xb.d)), _mm256_cvtepi32_ps(d), acc[t]);
        if constexpr (kL.has_min) {
          const float dsum = kL.halves == 2 ? xb.d * static_cast<float>(xb.sum16[kH]) : xb.dsum;
          offset[t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(dsum), offset[t]);
        }
      }
    });
  }
#pragma GCC unroll 8
  for (int t = 0; t < TOK; ++t) {
    const __m256 out = kL.has_min ? _mm256_add_ps(acc[t], offset[t]) : acc[t];
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
  constexpr Q8PanelLayout kL = kQ8Panels<T>;
  const int64_t blocks = k / 32;
  const int64_t panel_bytes = kL.super ? (blocks / 8) * (kL.header_bytes + 8 * kL.block_bytes) : blocks * kL.block_bytes;
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    const uint8_t* panel = w + p * panel_bytes;
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
  DispatchDType(w_type, [&](auto t) {
    constexpr DType T = decltype(t)::value;
    if constexpr (kHasQ8Panels<T>) Q8PanelRows<Dot, T>(w, n, k, xq, m, y, panel_begin, panel_end);
  });
}

}  // namespace
}  // namespace kvfleet::kernels
