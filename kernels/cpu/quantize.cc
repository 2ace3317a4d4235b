#include "kernels/cpu/quantize.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "kernels/cpu/dequant_block.h"

namespace kvfleet::kernels {
namespace {

template <DType T>
void DequantBlocks(const void* src, float* y, int64_t n) {
  RowBlocks<T> row(static_cast<const uint8_t*>(src));
  for (int64_t b = 0; b < n / 32; ++b, y += 32) {
    const Block32 v = row.Next(b);
    _mm256_storeu_ps(y, v.v0);
    _mm256_storeu_ps(y + 8, v.v1);
    _mm256_storeu_ps(y + 16, v.v2);
    _mm256_storeu_ps(y + 24, v.v3);
  }
}

}  // namespace

void DequantizeRow(DType type, const void* src, float* dst, int64_t n) {
  CHECK(n % Traits(type).block_elems == 0) << "row of " << n << " is not whole blocks of " << DTypeName(type);
  DispatchDType(type, [&](auto t) {
    constexpr DType T = decltype(t)::value;
    if constexpr (IsFloat(T)) {
      // Plain float rows need not be whole blocks of 32.
      const int64_t whole = n / 32 * 32;
      DequantBlocks<T>(src, dst, whole);
      for (int64_t i = whole; i < n; ++i) dst[i] = CpuFormat<T>::Value(static_cast<const uint8_t*>(src), i);
    } else {
      DequantBlocks<T>(src, dst, n);
    }
  });
}

void QuantizeRow(DType type, const float* src, void* dst, int64_t n) {
  CHECK(n % Traits(type).block_elems == 0) << "row of " << n << " is not whole blocks of " << DTypeName(type);
  DispatchDType(type, [&](auto t) { CpuFormat<decltype(t)::value>::Quantize(src, static_cast<uint8_t*>(dst), n); });
}

}  // namespace kvfleet::kernels
