#include "kernels/cpu/matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "common/check.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/simd.h"

namespace kvfleet::kernels {
namespace {

// Weight rows dequantized together; each shares every load of x.
constexpr int64_t kRowTile = 4;

// Dot products of kRows dequantized weight rows with one x row. Each pair has
// its own accumulator that walks k in steps of 8, then a fixed horizontal sum:
// the same operation order as DotReference.
template <int kRows>
void DotRows(const float* const* w, const float* x, int64_t k, float* out) {
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    for (int r = 0; r < kRows; ++r) acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(w[r] + i), xv, acc[r]);
  }
  for (int r = 0; r < kRows; ++r) out[r] = HorizontalSum(acc[r]);
}

void MatMulRows(const MatMulParams& p, int64_t row_begin, int64_t row_end) {
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(kRowTile * p.k));
  const int64_t row_bytes = RowBytes(p.w_type, p.k);
  const auto* w_bytes = static_cast<const uint8_t*>(p.w);
  for (int64_t j = row_begin; j < row_end; j += kRowTile) {
    const int64_t rows = std::min(kRowTile, row_end - j);
    const float* w[kRowTile];
    for (int64_t r = 0; r < rows; ++r) {
      float* dst = scratch.data() + r * p.k;
      DequantizeRow(p.w_type, w_bytes + (j + r) * row_bytes, dst, p.k);
      w[r] = dst;
    }
    float out[kRowTile];
    for (int64_t i = 0; i < p.m; ++i) {
      const float* x = p.x + i * p.k;
      float* y = p.y + i * p.n + j;
      if (rows == kRowTile) {
        DotRows<kRowTile>(w, x, p.k, out);
        for (int64_t r = 0; r < kRowTile; ++r) y[r] = out[r];
      } else {
        for (int64_t r = 0; r < rows; ++r) DotRows<1>(&w[r], x, p.k, &y[r]);
      }
    }
  }
}

}  // namespace

float DotReference(const float* w, const float* x, int64_t k) {
  float out;
  DotRows<1>(&w, x, k, &out);
  return out;
}

void MatMul(const MatMulParams& p, ThreadPool& pool) {
  CHECK(p.k % 32 == 0) << "matmul inner dimension " << p.k << " must be a multiple of 32";
  pool.ParallelFor(
      p.n, [&p](int64_t begin, int64_t end) { MatMulRows(p, begin, end); }, kRowTile);
}

}  // namespace kvfleet::kernels
