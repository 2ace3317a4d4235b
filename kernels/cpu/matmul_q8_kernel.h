// The integer-dot matmul's kernels, written once over an instruction-set
// policy and compiled once per policy (matmul_q8.cc: AVX2; matmul_q8_vnni.cc:
// AVX-512 VNNI). Everything here has internal linkage, so the AVX-512 copy
// can never be linked into the AVX2 path (an inline function shared by both
// translation units could be, and would fault on a CPU without AVX-512).
//
// The weights are panels of 8 rows (q8_panels.h); a register's lanes are
// output features: one panel's 8 (Lanes256, AVX2) or two panels' 16
// (Lanes512, AVX-512), so one instruction serves 8 or 16 rows. Arithmetic, the same in every policy (the
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
#include "kernels/cpu/simd.h"

namespace kvfleet::kernels {
namespace {  // NOLINT: one copy per instruction set, on purpose

// How far ahead of the panel block in use to prefetch: decode reads every
// weight once, and a 4 KiB lead measured 1.1-1.2x the decode rate of 1 KiB
// (2 threads, SmolLM2-135M Q4_1).
constexpr int64_t kPanelPrefetchBytes = 4096;

// One panel per register: 8 lanes of int32 or float32, lane r the panel's
// row r. A policy's V (Dot::V) is this or Lanes512 (matmul_q8_vnni.cc: two
// panels side by side); the kernels below are written once over V's ops.
// `panel_stride` (bytes from a panel to the next) is unused with one panel.
struct Lanes256 {
  using I = __m256i;
  using F = __m256;
  static constexpr int kPanels = 1;

  // 32 bytes of the panel at p.
  static I Load(const uint8_t* p, int64_t) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  // Four bytes of x (one group of a block), in every 32-bit lane.
  static I Broadcast(const int8_t* qs) {
    int32_t v;
    std::memcpy(&v, qs, 4);
    return _mm256_set1_epi32(v);
  }
  static I And(I a, I b) { return _mm256_and_si256(a, b); }
  static I Or(I a, I b) { return _mm256_or_si256(a, b); }
  template <int N>
  static I ShiftRight16(I v) {
    return _mm256_srli_epi16(v, N);
  }
  template <int N>
  static I ShiftLeft16(I v) {
    return _mm256_slli_epi16(v, N);
  }
  template <int N>
  static I ShiftRight32(I v) {
    return _mm256_srli_epi32(v, N);
  }
  static I SplatByte(char c) { return _mm256_set1_epi8(c); }
  static I SplatInt(int32_t v) { return _mm256_set1_epi32(v); }
  static I ZeroInt() { return _mm256_setzero_si256(); }
  static I Add16(I a, I b) { return _mm256_add_epi16(a, b); }
  static I Sub32(I a, I b) { return _mm256_sub_epi32(a, b); }
  // |w| as unsigned bytes, and x with w's sign (zero where w is): the
  // signed weights' (Q8_0) operands of an unsigned-by-signed dot.
  static I Abs8(I w) { return _mm256_sign_epi8(w, w); }
  static I SignOf(I x, I w) { return _mm256_sign_epi8(x, w); }
  // 8 f16 of each panel at p, as float.
  static F Halfs(const uint8_t* p, int64_t) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // 8 bytes of each panel at p, zero-extended to int32.
  static I Bytes32(const uint8_t* p, int64_t) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  // 8 bytes of each panel at p, as float.
  static F Bytes(const uint8_t* p, int64_t, bool is_signed) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtepi32_ps(is_signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b));
  }
  static F ToFloat(I v) { return _mm256_cvtepi32_ps(v); }
  static F SplatFloat(float v) { return _mm256_set1_ps(v); }
  static F ZeroFloat() { return _mm256_setzero_ps(); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F Negate(F v) { return _mm256_xor_ps(v, _mm256_set1_ps(-0.0f)); }
  // Lanes [0, rows) to y.
  static void Store(float* y, F v, int rows) {
    if (rows == 8) {
      _mm256_storeu_ps(y, v);
      return;
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    std::memcpy(y, lanes, static_cast<size_t>(rows) * sizeof(float));
  }
};

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
template <class V, DType T, int Q>
inline __attribute__((always_inline)) typename V::I UnsignedValues(const uint8_t* pb, int64_t stride) {
  constexpr Q8PanelLayout kL = kQ8Panels<T>;
  typename V::I u;
  if constexpr (kL.low_bits == 4) {
    const typename V::I v = V::Load(pb + 32 * (Q / 2), stride);
    u = V::And(Q % 2 == 0 ? v : V::template ShiftRight16<4>(v), V::SplatByte(0x0F));
  } else {
    u = V::And(V::template ShiftRight16<2 * (Q % 4)>(V::Load(pb + 32 * (Q / 4), stride)), V::SplatByte(3));
  }
  if constexpr (kL.high_bits == 1) {
    const typename V::I bit =
        V::And(V::template ShiftRight16<Q>(V::Load(pb + 32 * kL.low_bits, stride)), V::SplatByte(1));
    u = V::Or(u, V::template ShiftLeft16<kL.low_bits>(bit));
  } else if constexpr (kL.high_bits == 2) {
    const typename V::I hv = V::Load(pb + 32 * kL.low_bits + 32 * (Q / 4), stride);
    const typename V::I bits = V::And(V::template ShiftRight16<2 * (Q % 4)>(hv), V::SplatByte(3));
    u = V::Or(u, V::template ShiftLeft16<kL.low_bits>(bits));
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
inline __attribute__((always_inline)) void DotRegisters(const uint8_t* pb, int64_t stride, const BlockQ8A* x,
                                                        int64_t x_stride, int64_t b, typename Dot::V::I* dot) {
  using V = typename Dot::V;
  typename V::I sum16[TOK];
  ForEachRegister<B, E>([&](auto q) {
    constexpr int kQ = decltype(q)::value;
    if constexpr (kQ8Panels<T>.signed_values) {
      const typename V::I w = V::Load(pb + 32 * kQ, stride);
      const typename V::I u = V::Abs8(w);
#pragma GCC unroll 8
      for (int t = 0; t < TOK; ++t) {
        dot[t] = Dot::Accumulate(dot[t], u, V::SignOf(V::Broadcast(x[t * x_stride + b].qs + 4 * kQ), w));
      }
    } else if constexpr (Dot::kWidensThroughInt16 && Int16Registers<T>() > 1) {
      constexpr int kGroup = Int16Registers<T>();
      constexpr bool kFirst = (kQ - B) % kGroup == 0;
      constexpr bool kLast = (kQ - B) % kGroup == kGroup - 1 || kQ == E - 1;
      const typename V::I u = UnsignedValues<V, T, kQ>(pb, stride);
#pragma GCC unroll 8
      for (int t = 0; t < TOK; ++t) {
        const typename V::I pairs = Dot::Pairs(u, V::Broadcast(x[t * x_stride + b].qs + 4 * kQ));
        sum16[t] = kFirst ? pairs : V::Add16(sum16[t], pairs);
        if constexpr (kLast) dot[t] = Dot::Widen(dot[t], sum16[t]);
      }
    } else {
      const typename V::I u = UnsignedValues<V, T, kQ>(pb, stride);
#pragma GCC unroll 8
      for (int t = 0; t < TOK; ++t) dot[t] = Dot::Accumulate(dot[t], u, V::Broadcast(x[t * x_stride + b].qs + 4 * kQ));
    }
  });
}

// Walks a panel (or V::kPanels panels, `stride` bytes apart) block by
// block, b upward: where block b is, and its rows' float scales. A
// K-quant's super-block header (d, dmin) is read once per 8 blocks.
template <class V, DType T>
struct PanelWalk {
  using I = typename V::I;
  using F = typename V::F;
  static constexpr Q8PanelLayout kL = kQ8Panels<T>;

  const uint8_t* panel;
  int64_t stride;
  F d_super = V::ZeroFloat(), dmin_super = V::ZeroFloat();

  // Block b's bytes (prefetching ahead).
  const uint8_t* Block(int64_t b) {
    const uint8_t* pb;
    if constexpr (kL.super) {
      const uint8_t* header = panel + (b / 8) * (kL.header_bytes + 8 * kL.block_bytes);
      if (b % 8 == 0) {
        d_super = V::Halfs(header, stride);
        if constexpr (kL.has_min) dmin_super = V::Halfs(header + 16, stride);
      }
      pb = header + kL.header_bytes + (b % 8) * kL.block_bytes;
    } else {
      pb = panel + b * kL.block_bytes;
    }
    ForEachRegister<0, V::kPanels>([&](auto panel_index) {
      const char* ahead =
          reinterpret_cast<const char*>(pb + decltype(panel_index)::value * stride) + kPanelPrefetchBytes;
      _mm_prefetch(ahead, _MM_HINT_T0);
      _mm_prefetch(ahead + 64, _MM_HINT_T0);
      if constexpr (kL.block_bytes > 128) _mm_prefetch(ahead + 128, _MM_HINT_T0);
    });
    return pb;
  }

  // s_w and m_w (zero without a min) of half H of the block at pb.
  template <int H>
  void Scales(const uint8_t* pb, F* ws, F* mw) const {
    const uint8_t* scales = pb + 32 * (kL.low_bits + kL.high_bits);
    *mw = V::ZeroFloat();
    if constexpr (!kL.super) {
      *ws = V::Halfs(scales, stride);
      if constexpr (kL.has_min) *mw = V::Halfs(scales + 16, stride);
    } else if constexpr (kL.scales == Q8Scales::kPacked4) {
      const I wide = V::Bytes32(scales + 8 * H, stride);
      *ws = V::Mul(d_super, V::ToFloat(V::And(wide, V::SplatInt(0x0F))));
      *mw = V::Negate(V::Mul(dmin_super, V::ToFloat(V::template ShiftRight32<4>(wide))));
    } else if constexpr (kL.scales == Q8Scales::kSigned8) {  // Q3_K, Q6_K
      *ws = V::Mul(d_super, V::Bytes(scales + 8 * H, stride, true));
    } else {  // Q4_K, Q5_K
      *ws = V::Mul(d_super, V::Bytes(scales, stride, false));
      *mw = V::Negate(V::Mul(dmin_super, V::Bytes(scales + 8, stride, false)));
    }
  }
};

// One token's block (half H) into its sums: acc += (s_w · d_x) ·
// float(dot − zero · Σx); offset += m_w · d_x Σx.
template <class V, DType T, int H>
inline __attribute__((always_inline)) void AddBlock(const BlockQ8A& xb, typename V::I dot, typename V::F ws,
                                                    typename V::F mw, typename V::F& acc, typename V::F& offset) {
  constexpr Q8PanelLayout kL = kQ8Panels<T>;
  if constexpr (kL.zero != 0) {
    const int32_t sum = kL.halves == 2 ? xb.sum16[H] : xb.sum;
    dot = V::Sub32(dot, V::SplatInt(kL.zero * sum));
  }
  acc = V::Fma(V::Mul(ws, V::SplatFloat(xb.d)), V::ToFloat(dot), acc);
  if constexpr (kL.has_min) {
    const float dsum = kL.halves == 2 ? xb.d * static_cast<float>(xb.sum16[H]) : xb.dsum;
    offset = V::Fma(mw, V::SplatFloat(dsum), offset);
  }
}

// TOK tokens against V::kPanels panels, the next `stride` bytes after
// `panel` (0: the one panel in both halves): y[t · y_stride + r] for the
// panels' rows r below `rows`. x[t · x_stride + b] is token t's block b.
// Register by register, every token in turn: the tokens' sums stay in
// registers (AVX-512's 32 hold eight tokens').
template <class Dot, DType T, int TOK>
inline void PanelTokens(const uint8_t* panel, int64_t stride, int64_t blocks, const BlockQ8A* x, int64_t x_stride,
                        float* y, int64_t y_stride, int rows) {
  using V = typename Dot::V;
  using I = typename V::I;
  using F = typename V::F;
  constexpr Q8PanelLayout kL = kQ8Panels<T>;
  F acc[TOK], offset[TOK];
#pragma GCC unroll 8
  for (int t = 0; t < TOK; ++t) acc[t] = offset[t] = V::ZeroFloat();
  PanelWalk<V, T> walk{panel, stride};
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* pb = walk.Block(b);
    ForEachRegister<0, kL.halves>([&](auto half) {
      constexpr int kH = decltype(half)::value;
      constexpr int kPerHalf = 8 / kL.halves;
      I dot[TOK];
#pragma GCC unroll 8
      for (int t = 0; t < TOK; ++t) dot[t] = V::ZeroInt();
      DotRegisters<Dot, T, TOK, kH * kPerHalf, (kH + 1) * kPerHalf>(pb, stride, x, x_stride, b, dot);
      F ws, mw;
      walk.template Scales<kH>(pb, &ws, &mw);
#pragma GCC unroll 8
      for (int t = 0; t < TOK; ++t) AddBlock<V, T, kH>(x[t * x_stride + b], dot[t], ws, mw, acc[t], offset[t]);
    });
  }
#pragma GCC unroll 8
  for (int t = 0; t < TOK; ++t) V::Store(y + t * y_stride, kL.has_min ? V::Add(acc[t], offset[t]) : acc[t], rows);
}

// The same sums in the other order, for a policy with 16 registers (AVX2)
// and unsigned values: per block, the 8 u-registers are formed once and
// held while each of `tokens` (at most Dot::kHeldTokens) tokens in turn passes
// over them; the tokens' sums wait in L1. Fewer instructions per token
// than PanelTokens' order, which would spill them.
template <class Dot, DType T, int B, int E>
inline __attribute__((always_inline)) typename Dot::V::I HeldDot(const typename Dot::V::I* u, const int8_t* qs) {
  using V = typename Dot::V;
  typename V::I dot = V::ZeroInt(), sum16 = V::ZeroInt();
  ForEachRegister<B, E>([&](auto q) {
    constexpr int kQ = decltype(q)::value;
    constexpr int kGroup = Int16Registers<T>();
    const typename V::I pairs = Dot::Pairs(u[kQ], V::Broadcast(qs + 4 * kQ));
    sum16 = (kQ - B) % kGroup == 0 ? pairs : V::Add16(sum16, pairs);
    if constexpr ((kQ - B) % kGroup == kGroup - 1 || kQ == E - 1) dot = Dot::Widen(dot, sum16);
  });
  return dot;
}

template <class Dot, DType T>
inline void PanelTokensHeld(const uint8_t* panel, int64_t stride, int64_t blocks, const BlockQ8A* x, int64_t x_stride,
                            float* y, int64_t y_stride, int rows, int tokens) {
  using V = typename Dot::V;
  using I = typename V::I;
  using F = typename V::F;
  constexpr Q8PanelLayout kL = kQ8Panels<T>;
  F acc[Dot::kHeldTokens], offset[Dot::kHeldTokens];
  for (int t = 0; t < tokens; ++t) acc[t] = offset[t] = V::ZeroFloat();
  PanelWalk<V, T> walk{panel, stride};
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* pb = walk.Block(b);
    I u[8];
    ForEachRegister<0, 8>(
        [&](auto q) { u[decltype(q)::value] = UnsignedValues<V, T, decltype(q)::value>(pb, stride); });
    ForEachRegister<0, kL.halves>([&](auto half) {
      constexpr int kH = decltype(half)::value;
      constexpr int kPerHalf = 8 / kL.halves;
      F ws, mw;
      walk.template Scales<kH>(pb, &ws, &mw);
      for (int t = 0; t < tokens; ++t) {
        const BlockQ8A& xb = x[t * x_stride + b];
        AddBlock<V, T, kH>(xb, HeldDot<Dot, T, kH * kPerHalf, (kH + 1) * kPerHalf>(u, xb.qs), ws, mw, acc[t],
                           offset[t]);
      }
    });
  }
  for (int t = 0; t < tokens; ++t) V::Store(y + t * y_stride, kL.has_min ? V::Add(acc[t], offset[t]) : acc[t], rows);
}

// Panels [panel_begin, panel_end) of y = x · Wᵀ for the m quantized tokens
// xq ([m][k / 32] blocks), V::kPanels at a time (an odd one left over runs
// alone): the panels stay in L1 while every group of Dot::kTokens tokens
// passes over them.
template <class Dot, DType T>
void Q8PanelRows(const uint8_t* w, int64_t n, int64_t k, const BlockQ8A* xq, int64_t m, float* y, int64_t panel_begin,
                 int64_t panel_end) {
  constexpr int kTok = Dot::kTokens;
  constexpr int kPanels = Dot::V::kPanels;
  constexpr Q8PanelLayout kL = kQ8Panels<T>;
  const int64_t blocks = k / 32;
  const int64_t panel_bytes =
      kL.super ? (blocks / 8) * (kL.header_bytes + 8 * kL.block_bytes) : blocks * kL.block_bytes;
  for (int64_t p = panel_begin; p < panel_end; p += kPanels) {
    const uint8_t* panel = w + p * panel_bytes;
    const bool together = kPanels == 2 && p + 1 < panel_end;
    const int64_t stride = together ? panel_bytes : 0;
    const int64_t row_cap = together ? 16 : 8;
    const int rows = static_cast<int>(n - 8 * p < row_cap ? n - 8 * p : row_cap);
    if constexpr (Dot::kHeldTokens > 0 && !kL.signed_values) {
      constexpr int64_t kHeld = Dot::kHeldTokens;
      for (int64_t t0 = 0; t0 < m; t0 += kHeld) {
        PanelTokensHeld<Dot, T>(panel, stride, blocks, xq + t0 * blocks, blocks, y + t0 * n + 8 * p, n, rows,
                                static_cast<int>(m - t0 < kHeld ? m - t0 : kHeld));
      }
      continue;
    }
    for (int64_t t0 = 0; t0 < m; t0 += kTok) {
      const BlockQ8A* x = xq + t0 * blocks;
      float* out = y + t0 * n + 8 * p;
      WithCount<kTok>(m - t0 < kTok ? m - t0 : kTok, [&](auto tokens) {
        PanelTokens<Dot, T, decltype(tokens)::value>(panel, stride, blocks, x, blocks, out, n, rows);
      });
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
