#include "kernels/cpu/quantize.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "kernels/cpu/dequant_block.h"
#include "common/float16.h"
#include "kernels/cpu/quant_blocks.h"

namespace kvfleet::kernels {
namespace {

template <DType T>
void DequantBlocks(const void* src, float* y, int64_t n) {
  const auto* row = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / 32; ++b, y += 32) {
    const Block32 v = LoadBlock32<T>(row, b);
    _mm256_storeu_ps(y, v.v0);
    _mm256_storeu_ps(y + 8, v.v1);
    _mm256_storeu_ps(y + 16, v.v2);
    _mm256_storeu_ps(y + 24, v.v3);
  }
}

// Plain float types may have rows that are not whole blocks of 32.
void DequantF16Tail(const uint16_t* x, float* y, int64_t from, int64_t n) {
  for (int64_t i = from; i < n; ++i) y[i] = HalfToFloat(x[i]);
}
void DequantBf16Tail(const uint16_t* x, float* y, int64_t from, int64_t n) {
  for (int64_t i = from; i < n; ++i) y[i] = Bf16ToFloat(x[i]);
}

// ggml's reference quantizers (quantize_row_*_ref), restated.
void QuantQ8_0(const float* x, BlockQ8_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = FloatToHalf(d);
    for (int j = 0; j < 32; ++j) b[i].qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
  }
}

void QuantQ4_0(const float* x, BlockQ4_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = FloatToHalf(d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantQ4_1(const float* x, BlockQ4_1* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float min = x[0], max = x[0];
    for (int j = 1; j < 32; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = FloatToHalf(d);
    b[i].m = FloatToHalf(min);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>((x[j] - min) * id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((x[j + 16] - min) * id + 0.5f));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

}  // namespace

void DequantizeRow(DType type, const void* src, float* dst, int64_t n) {
  CHECK(n % Traits(type).block_elems == 0) << "row of " << n << " is not whole blocks of " << DTypeName(type);
  const int64_t whole = n / 32 * 32;
  switch (type) {
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::kF16:
      DequantBlocks<DType::kF16>(src, dst, whole);
      DequantF16Tail(static_cast<const uint16_t*>(src), dst, whole, n);
      return;
    case DType::kBF16:
      DequantBlocks<DType::kBF16>(src, dst, whole);
      DequantBf16Tail(static_cast<const uint16_t*>(src), dst, whole, n);
      return;
    case DType::kQ8_0: DequantBlocks<DType::kQ8_0>(src, dst, n); return;
    case DType::kQ4_0: DequantBlocks<DType::kQ4_0>(src, dst, n); return;
    case DType::kQ4_1: DequantBlocks<DType::kQ4_1>(src, dst, n); return;
  }
}

void QuantizeRow(DType type, const float* src, void* dst, int64_t n) {
  CHECK(n % Traits(type).block_elems == 0) << "row of " << n << " is not whole blocks of " << DTypeName(type);
  switch (type) {
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::kF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) out[i] = FloatToHalf(src[i]);
      return;
    }
    case DType::kBF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) out[i] = FloatToBf16(src[i]);
      return;
    }
    case DType::kQ8_0: QuantQ8_0(src, static_cast<BlockQ8_0*>(dst), n / 32); return;
    case DType::kQ4_0: QuantQ4_0(src, static_cast<BlockQ4_0*>(dst), n / 32); return;
    case DType::kQ4_1: QuantQ4_1(src, static_cast<BlockQ4_1*>(dst), n / 32); return;
  }
}

}  // namespace kvfleet::kernels
