#include "kernels/cpu/quantize.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "kernels/cpu/dequant_block.h"

namespace kvfleet::kernels {
namespace {

// Values [8c, 8c + 8) to y + c · chunk_stride.
template <DType T>
void DequantBlocks(const void* src, float* y, int64_t n, int64_t chunk_stride) {
  RowBlocks<T> row(static_cast<const uint8_t*>(src));
  for (int64_t b = 0; b < n / 32; ++b, y += 4 * chunk_stride) {
    const Block32 v = row.Next(b);
    _mm256_storeu_ps(y, v.v0);
    _mm256_storeu_ps(y + chunk_stride, v.v1);
    _mm256_storeu_ps(y + 2 * chunk_stride, v.v2);
    _mm256_storeu_ps(y + 3 * chunk_stride, v.v3);
  }
}

}  // namespace

void DequantizeRowInChunks(DType type, const void* src, float* dst, int64_t n, int64_t chunk_stride) {
  CHECK(n % Traits(type).block_elems == 0) << "row of " << n << " is not whole blocks of " << DTypeName(type);
  DispatchDType(type, [&](auto t) {
    constexpr DType T = decltype(t)::value;
    if constexpr (IsFloat(T)) {
      // Plain float rows need not be whole blocks of 32.
      const int64_t whole = n / 32 * 32;
      DequantBlocks<T>(src, dst, whole, chunk_stride);
      for (int64_t i = whole; i < n; ++i) {
        dst[i / 8 * chunk_stride + i % 8] = CpuFormat<T>::Value(static_cast<const uint8_t*>(src), i);
      }
    } else {
      DequantBlocks<T>(src, dst, n, chunk_stride);
    }
  });
}

void DequantizeRow(DType type, const void* src, float* dst, int64_t n) {
  DequantizeRowInChunks(type, src, dst, n, /*chunk_stride=*/8);
}

void QuantizeRow(DType type, const float* src, void* dst, int64_t n) {
  CHECK(n % Traits(type).block_elems == 0) << "row of " << n << " is not whole blocks of " << DTypeName(type);
  DispatchDType(type, [&](auto t) { CpuFormat<decltype(t)::value>::Quantize(src, static_cast<uint8_t*>(dst), n); });
}

}  // namespace kvfleet::kernels
