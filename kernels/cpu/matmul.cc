#include "kernels/cpu/matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "common/check.h"
#include "kernels/cpu/dequant_block.h"
#include "kernels/cpu/matmul_f32_avx512.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/simd.h"

namespace kvfleet::kernels {
namespace {

// Weight rows dequantized together; each shares every load of x. The
// AVX-512 kernel takes twice as many (two rows a register).
constexpr int64_t kRowTile = 4;
constexpr int64_t kWideRowTile = 8;

bool CpuHasAvx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

std::atomic<FloatDotIsa>& ActiveIsa() {
  static std::atomic<FloatDotIsa> isa{CpuHasAvx512() ? FloatDotIsa::kAvx512 : FloatDotIsa::kAvx2};
  return isa;
}

// Dot products of four dequantized weight rows (w, w + k, w + 2k, w + 3k)
// with one x row. Each pair has its own accumulator that walks k in steps of
// 8, then a fixed horizontal sum: the same operation order as DotOne. The
// accumulators are named registers: an array here ends up on the stack.
void DotFour(const float* w, const float* x, int64_t k, float* out) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  const float* w1 = w + k;
  const float* w2 = w + 2 * k;
  const float* w3 = w + 3 * k;
  for (int64_t i = 0; i < k; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), xv, a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + i), xv, a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + i), xv, a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + i), xv, a3);
  }
  out[0] = HorizontalSum(a0);
  out[1] = HorizontalSum(a1);
  out[2] = HorizontalSum(a2);
  out[3] = HorizontalSum(a3);
}

// DotFour for three x rows at once: twelve accumulators, so the FMA units
// always have independent chains (eight only just cover their latency),
// and each weight load serves three rows. Each accumulator walks k as
// DotFour's do: bit-identical.
void DotFourThree(const float* w, const float* x0, int64_t k, float* y, int64_t y_stride) {
  __m256 a00 = _mm256_setzero_ps(), a10 = _mm256_setzero_ps(), a20 = _mm256_setzero_ps(), a30 = _mm256_setzero_ps();
  __m256 a01 = _mm256_setzero_ps(), a11 = _mm256_setzero_ps(), a21 = _mm256_setzero_ps(), a31 = _mm256_setzero_ps();
  __m256 a02 = _mm256_setzero_ps(), a12 = _mm256_setzero_ps(), a22 = _mm256_setzero_ps(), a32 = _mm256_setzero_ps();
  const float* x1 = x0 + k;
  const float* x2 = x1 + k;
  for (int64_t i = 0; i < k; i += 8) {
    const __m256 xa = _mm256_loadu_ps(x0 + i), xb = _mm256_loadu_ps(x1 + i), xc = _mm256_loadu_ps(x2 + i);
    __m256 v = _mm256_loadu_ps(w + i);
    a00 = _mm256_fmadd_ps(v, xa, a00);
    a01 = _mm256_fmadd_ps(v, xb, a01);
    a02 = _mm256_fmadd_ps(v, xc, a02);
    v = _mm256_loadu_ps(w + k + i);
    a10 = _mm256_fmadd_ps(v, xa, a10);
    a11 = _mm256_fmadd_ps(v, xb, a11);
    a12 = _mm256_fmadd_ps(v, xc, a12);
    v = _mm256_loadu_ps(w + 2 * k + i);
    a20 = _mm256_fmadd_ps(v, xa, a20);
    a21 = _mm256_fmadd_ps(v, xb, a21);
    a22 = _mm256_fmadd_ps(v, xc, a22);
    v = _mm256_loadu_ps(w + 3 * k + i);
    a30 = _mm256_fmadd_ps(v, xa, a30);
    a31 = _mm256_fmadd_ps(v, xb, a31);
    a32 = _mm256_fmadd_ps(v, xc, a32);
  }
  y[0] = HorizontalSum(a00);
  y[1] = HorizontalSum(a10);
  y[2] = HorizontalSum(a20);
  y[3] = HorizontalSum(a30);
  y[y_stride] = HorizontalSum(a01);
  y[y_stride + 1] = HorizontalSum(a11);
  y[y_stride + 2] = HorizontalSum(a21);
  y[y_stride + 3] = HorizontalSum(a31);
  y[2 * y_stride] = HorizontalSum(a02);
  y[2 * y_stride + 1] = HorizontalSum(a12);
  y[2 * y_stride + 2] = HorizontalSum(a22);
  y[2 * y_stride + 3] = HorizontalSum(a32);
}

float DotOne(const float* w, const float* x, int64_t k) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc);
  return HorizontalSum(acc);
}

// Up to this many x rows, dequantizing into registers beats dequantizing
// into scratch (decode steps, and verification of speculative tokens).
// Both paths give identical bits.
constexpr int64_t kFusedMaxRows = 10;
// The few-rows kernel walks one weight row after another, a single stream:
// prefetch this far ahead in it (4 KiB measured 1.02-1.03x 1 KiB at 4 and 8
// streams).
constexpr int64_t kPrefetchBytes = 4096;

// The bytes of 32 values of a row (rounded down for Q6_K's 26.25): how far
// ahead the prefetches reach.
constexpr int64_t BytesPerBlock32(DType t) { return Traits(t).block_bytes * 32 / Traits(t).block_elems; }

// acc += block · x[32b .. 32b+31], in element order.
inline __m256 FmaBlock(const Block32& w, const float* x, __m256 acc) {
  acc = _mm256_fmadd_ps(w.v0, _mm256_loadu_ps(x), acc);
  acc = _mm256_fmadd_ps(w.v1, _mm256_loadu_ps(x + 8), acc);
  acc = _mm256_fmadd_ps(w.v2, _mm256_loadu_ps(x + 16), acc);
  return _mm256_fmadd_ps(w.v3, _mm256_loadu_ps(x + 24), acc);
}

template <DType T>
void FusedMatMulRows(const MatMulParams& p, int64_t row_begin, int64_t row_end) {
  const int64_t row_bytes = RowBytes(T, p.k);
  const int64_t blocks = p.k / 32;
  const auto* w = static_cast<const uint8_t*>(p.w);
  for (int64_t i = 0; i < p.m; ++i) {
    const float* x = p.x + i * p.k;
    float* y = p.y + i * p.n;
    int64_t j = row_begin;
    for (; j + 4 <= row_end; j += 4) {
      const uint8_t* r0 = w + j * row_bytes;
      const uint8_t* r1 = r0 + row_bytes;
      const uint8_t* r2 = r1 + row_bytes;
      const uint8_t* r3 = r2 + row_bytes;
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
      RowBlocks<T> w0(r0), w1(r1), w2(r2), w3(r3);
      for (int64_t b = 0; b < blocks; ++b) {
        const float* xb = x + 32 * b;
        // The hardware prefetcher does not hide memory latency here (decode
        // reads every weight once): fetch the rows two groups ahead (the
        // 4 rows are contiguous), 4 blocks' worth per block of these.
        const uint8_t* ahead = r0 + 8 * row_bytes + b * 4 * BytesPerBlock32(T);
        for (int64_t line = 0; line < 4 * BytesPerBlock32(T); line += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(ahead + line), _MM_HINT_T0);
        }
        a0 = FmaBlock(w0.Next(b), xb, a0);
        a1 = FmaBlock(w1.Next(b), xb, a1);
        a2 = FmaBlock(w2.Next(b), xb, a2);
        a3 = FmaBlock(w3.Next(b), xb, a3);
      }
      y[j] = HorizontalSum(a0);
      y[j + 1] = HorizontalSum(a1);
      y[j + 2] = HorizontalSum(a2);
      y[j + 3] = HorizontalSum(a3);
    }
    for (; j < row_end; ++j) {
      __m256 a = _mm256_setzero_ps();
      RowBlocks<T> row(w + j * row_bytes);
      for (int64_t b = 0; b < blocks; ++b) a = FmaBlock(row.Next(b), x + 32 * b, a);
      y[j] = HorizontalSum(a);
    }
  }
}

// The fused path for a few x rows (a decode step with its speculative
// tokens): each weight block is dequantized into registers once and applied
// to R x rows at a time (R <= 10: R accumulators, the block's four registers
// and one for x), so neither memory traffic nor dequantization grows with
// the rows. Every (x row, weight row) accumulator walks the blocks exactly
// as FmaBlock does in the one-row loop: identical bits.
template <DType T, int R>
void FusedRowTile(const uint8_t* w_row, const float* x, int64_t k, int64_t blocks, float* y, int64_t y_stride) {
  __m256 acc[R];
#pragma GCC unroll 10
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  RowBlocks<T> row(w_row);
  for (int64_t b = 0; b < blocks; ++b) {
    _mm_prefetch(reinterpret_cast<const char*>(w_row + b * BytesPerBlock32(T) + kPrefetchBytes), _MM_HINT_T0);
    const Block32 wb = row.Next(b);
#pragma GCC unroll 10
    for (int r = 0; r < R; ++r) acc[r] = FmaBlock(wb, x + r * k + 32 * b, acc[r]);
  }
#pragma GCC unroll 10
  for (int r = 0; r < R; ++r) y[r * y_stride] = HorizontalSum(acc[r]);
}

template <DType T>
void FusedMatMulFewRows(const MatMulParams& p, int64_t row_begin, int64_t row_end) {
  constexpr int64_t kXTile = 10;  // accumulators + a block + x: 15 of 16 registers
  const int64_t row_bytes = RowBytes(T, p.k);
  const int64_t blocks = p.k / 32;
  const auto* w = static_cast<const uint8_t*>(p.w);
  for (int64_t j = row_begin; j < row_end; ++j) {
    const uint8_t* row = w + j * row_bytes;
    for (int64_t i0 = 0; i0 < p.m; i0 += kXTile) {
      const float* x = p.x + i0 * p.k;
      float* y = p.y + i0 * p.n + j;
      WithCount<kXTile>(std::min(kXTile, p.m - i0),
                        [&](auto rows) { FusedRowTile<T, decltype(rows)::value>(row, x, p.k, blocks, y, p.n); });
    }
  }
}

template <DType T>
void FusedMatMulTyped(const MatMulParams& p, int64_t row_begin, int64_t row_end) {
  if (p.m == 1) return FusedMatMulRows<T>(p, row_begin, row_end);
  return FusedMatMulFewRows<T>(p, row_begin, row_end);
}

void FusedMatMul(const MatMulParams& p, int64_t row_begin, int64_t row_end) {
  DispatchDType(p.w_type, [&](auto t) { FusedMatMulTyped<decltype(t)::value>(p, row_begin, row_end); });
}

std::vector<float>& RowScratch() {
  thread_local std::vector<float> scratch;
  return scratch;
}

// `wide`: the 8-row tiles of the AVX-512 kernel first.
void MatMulRows(const MatMulParams& p, int64_t row_begin, int64_t row_end, bool wide) {
  std::vector<float>& scratch = RowScratch();
  scratch.resize(static_cast<size_t>(kWideRowTile * p.k));
  const int64_t row_bytes = RowBytes(p.w_type, p.k);
  const auto* w_bytes = static_cast<const uint8_t*>(p.w);
  int64_t j = row_begin;
  if (wide) {
    for (; j + kWideRowTile <= row_end; j += kWideRowTile) {
      for (int64_t r = 0; r < kWideRowTile; ++r) {
        DequantizeRowInChunks(p.w_type, w_bytes + (j + r) * row_bytes, scratch.data() + EightRowTileOffset(r, p.k), p.k,
                              kEightRowTileChunkStride);
      }
      // The next tile's weights, towards L2 while this one is multiplied:
      // filling a tile waited on memory (an alternated A/B on a 1.5B model
      // at 16 streams: 1.06x the step rate with this).
      if (j + 2 * kWideRowTile <= row_end) {
        const char* next = reinterpret_cast<const char*>(w_bytes + (j + kWideRowTile) * row_bytes);
        for (int64_t b = 0; b < kWideRowTile * row_bytes; b += 64) _mm_prefetch(next + b, _MM_HINT_T1);
      }
      DotEightRowsAvx512(scratch.data(), p.x, p.k, p.m, p.y + j, p.n);
    }
  }
  for (; j < row_end; j += kRowTile) {
    const int64_t rows = std::min(kRowTile, row_end - j);
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(p.w_type, w_bytes + (j + r) * row_bytes, scratch.data() + r * p.k, p.k);
    }
    int64_t i = 0;
    if (rows == kRowTile) {
      // Tokens left over (at most two) take DotFour one at a time.
      for (; i + 3 <= p.m; i += 3) DotFourThree(scratch.data(), p.x + i * p.k, p.k, p.y + i * p.n + j, p.n);
    }
    for (; i < p.m; ++i) {
      const float* x = p.x + i * p.k;
      float* y = p.y + i * p.n + j;
      if (rows == kRowTile) {
        DotFour(scratch.data(), x, p.k, y);
      } else {
        for (int64_t r = 0; r < rows; ++r) y[r] = DotOne(scratch.data() + r * p.k, x, p.k);
      }
    }
  }
}

}  // namespace

float DotReference(const float* w, const float* x, int64_t k) { return DotOne(w, x, k); }

void ReserveMatMulScratch(int64_t max_k) { RowScratch().reserve(static_cast<size_t>(kWideRowTile * max_k)); }

FloatDotIsa ActiveFloatDotIsa() { return ActiveIsa().load(); }

bool ForceFloatDotIsa(FloatDotIsa isa) {
  if (isa == FloatDotIsa::kAvx512 && !CpuHasAvx512()) return false;
  ActiveIsa().store(isa);
  return true;
}

std::string_view FloatDotIsaName(FloatDotIsa isa) { return isa == FloatDotIsa::kAvx2 ? "avx2" : "avx512"; }

void MatMul(const MatMulParams& p, ThreadPool& pool) {
  CHECK(p.k % 32 == 0) << "matmul inner dimension " << p.k << " must be a multiple of 32";
  if (p.m <= kFusedMaxRows) {
    pool.ParallelFor(
        p.n, [&p](int64_t begin, int64_t end) { FusedMatMul(p, begin, end); }, kRowTile);
  } else {
    // Threads take whole 8-row tiles where the AVX-512 kernel runs.
    const bool wide = ActiveIsa().load(std::memory_order_relaxed) == FloatDotIsa::kAvx512;
    pool.ParallelFor(
        p.n, [&p, wide](int64_t begin, int64_t end) { MatMulRows(p, begin, end, wide); },
        wide ? kWideRowTile : kRowTile);
  }
}

}  // namespace kvfleet::kernels
