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
  RowBlocks<T> row(static_cast<const uint8_t*>(src));
  for (int64_t b = 0; b < n / 32; ++b, y += 32) {
    const Block32 v = row.Next(b);
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

void QuantQ5_0(const float* x, BlockQ5_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = FloatToHalf(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(31, static_cast<int>(x[j] * id + 16.5f));
      const int q1 = std::min(31, static_cast<int>(x[j + 16] * id + 16.5f));
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(b[i].qh, &qh, sizeof(qh));
  }
}

void QuantQ5_1(const float* x, BlockQ5_1* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float min = x[0], max = x[0];
    for (int j = 1; j < 32; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = FloatToHalf(d);
    b[i].m = FloatToHalf(min);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(31, static_cast<int>((x[j] - min) * id + 0.5f));
      const int q1 = std::min(31, static_cast<int>((x[j + 16] - min) * id + 0.5f));
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(b[i].qh, &qh, sizeof(qh));
  }
}

// The K-quants' quantizers here are plain min/max ones (ggml's search for
// the best scales is not restated): they write valid blocks, for the test
// models and tools; real K-quant files come from llama.cpp.
int RoundClamp(float v, int lo, int hi) { return std::clamp(static_cast<int>(std::lround(v)), lo, hi); }

// The scale of each 16 values of a super-block whose largest magnitude is
// to be `steps` steps (Q3_K, Q6_K), and the largest of them.
float SymmetricScales16(const float* x, float steps, float* scale) {
  float max_scale = 0.0f;
  for (int g = 0; g < 16; ++g) {
    float amax = 0.0f;
    for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * g + l]));
    scale[g] = amax / steps;
    max_scale = std::max(max_scale, scale[g]);
  }
  return max_scale;
}

// Per 16 values: a 4-bit scale and a 4-bit min against the super-block's d
// and dmin; values in 0..3.
void QuantQ2_K(const float* x, BlockQ2_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float scale[16], min[16], max_scale = 0.0f, max_min = 0.0f;
    for (int g = 0; g < 16; ++g) {
      float lo = 0.0f, hi = 0.0f;
      for (int l = 0; l < 16; ++l) {
        lo = std::min(lo, x[16 * g + l]);
        hi = std::max(hi, x[16 * g + l]);
      }
      scale[g] = (hi - lo) / 3.0f;
      min[g] = -lo;
      max_scale = std::max(max_scale, scale[g]);
      max_min = std::max(max_min, min[g]);
    }
    b[i].d = FloatToHalf(max_scale / 15.0f);
    b[i].dmin = FloatToHalf(max_min / 15.0f);
    const float d = HalfToFloat(b[i].d), dmin = HalfToFloat(b[i].dmin);
    std::memset(b[i].qs, 0, sizeof(b[i].qs));
    for (int g = 0; g < 16; ++g) {
      // The scale rounded up, so the range still covers the values.
      const int ls = d > 0.0f ? std::clamp(static_cast<int>(std::ceil(scale[g] / d)), 0, 15) : 0;
      const int lm = dmin > 0.0f ? RoundClamp(min[g] / dmin, 0, 15) : 0;
      b[i].scales[g] = static_cast<uint8_t>(ls | (lm << 4));
      const float dd = d * static_cast<float>(ls), dm = dmin * static_cast<float>(lm);
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * g + l;
        const int q = dd > 0.0f ? RoundClamp((x[e] + dm) / dd, 0, 3) : 0;
        b[i].qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(q << (2 * ((e % 128) / 32)));
      }
    }
  }
}

// Per 16 values: a signed 6-bit scale against the super-block's d; values
// in −4..3.
void QuantQ3_K(const float* x, BlockQ3_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float scale[16];
    const float max_scale = SymmetricScales16(x, 3.5f, scale);
    b[i].d = FloatToHalf(max_scale / 31.0f);
    const float d = HalfToFloat(b[i].d);
    std::memset(b[i].hmask, 0, sizeof(b[i].hmask));
    std::memset(b[i].qs, 0, sizeof(b[i].qs));
    std::memset(b[i].scales, 0, sizeof(b[i].scales));
    for (int g = 0; g < 16; ++g) {
      const int sc = d > 0.0f ? RoundClamp(scale[g] / d, -32, 31) : 0;
      const int stored = sc + 32;
      b[i].scales[g % 8] |= static_cast<uint8_t>((stored & 0x0f) << (4 * (g / 8)));
      b[i].scales[8 + g % 4] |= static_cast<uint8_t>((stored >> 4) << (2 * (g / 4)));
      const float dd = d * static_cast<float>(sc);
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * g + l;
        const int u = (dd != 0.0f ? RoundClamp(x[e] / dd, -4, 3) : 0) + 4;
        b[i].qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((u & 3) << (2 * ((e % 128) / 32)));
        b[i].hmask[e % 32] |= static_cast<uint8_t>((u >> 2) << (e / 32));
      }
    }
  }
}

// Q4_K's and Q5_K's scales, mins and values (kLevels: 15 or 31) of one
// super-block, the values one byte each.
template <int kLevels>
void QuantKWithMins(const float* x, uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales, uint8_t* values) {
  float scale[8], min[8], max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    float lo = 0.0f, hi = x[32 * j];
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, x[32 * j + l]);
      hi = std::max(hi, x[32 * j + l]);
    }
    scale[j] = (hi - lo) / kLevels;
    min[j] = -lo;
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, min[j]);
  }
  *d_out = FloatToHalf(max_scale / 63.0f);
  *dmin_out = FloatToHalf(max_min / 63.0f);
  const float d = HalfToFloat(*d_out), dmin = HalfToFloat(*dmin_out);
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const int ls = d > 0.0f ? RoundClamp(scale[j] / d, 0, 63) : 0;
    const int lm = dmin > 0.0f ? RoundClamp(min[j] / dmin, 0, 63) : 0;
    if (j < 4) {
      scales[j] = static_cast<uint8_t>(ls);
      scales[j + 4] = static_cast<uint8_t>(lm);
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls & 0x0f) | ((lm & 0x0f) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
    const float dd = d * static_cast<float>(ls), dm = dmin * static_cast<float>(lm);
    for (int l = 0; l < 32; ++l) values[32 * j + l] = static_cast<uint8_t>(dd > 0.0f ? RoundClamp((x[32 * j + l] + dm) / dd, 0, kLevels) : 0);
  }
}

void QuantQ5_K(const float* x, BlockQ5_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    uint8_t q[256];
    QuantKWithMins<31>(x, &b[i].d, &b[i].dmin, b[i].scales, q);
    std::memset(b[i].qs, 0, sizeof(b[i].qs));
    std::memset(b[i].qh, 0, sizeof(b[i].qh));
    for (int e = 0; e < 256; ++e) {
      const int j = e / 32, l = e % 32;
      b[i].qs[32 * (j / 2) + l] |= static_cast<uint8_t>((q[e] & 0x0f) << (4 * (j % 2)));
      b[i].qh[l] |= static_cast<uint8_t>((q[e] >> 4) << j);
    }
  }
}

void QuantQ4_K(const float* x, BlockQ4_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    uint8_t q[256];
    QuantKWithMins<15>(x, &b[i].d, &b[i].dmin, b[i].scales, q);
    std::memset(b[i].qs, 0, sizeof(b[i].qs));
    for (int e = 0; e < 256; ++e) b[i].qs[32 * (e / 64) + e % 32] |= static_cast<uint8_t>(q[e] << (4 * ((e / 32) % 2)));
  }
}

void QuantQ6_K(const float* x, BlockQ6_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float scale[16];
    const float max_scale = SymmetricScales16(x, 31.0f, scale);
    b[i].d = FloatToHalf(max_scale / 127.0f);
    const float d = HalfToFloat(b[i].d);
    std::memset(b[i].ql, 0, sizeof(b[i].ql));
    std::memset(b[i].qh, 0, sizeof(b[i].qh));
    for (int g = 0; g < 16; ++g) {
      const int sc = d > 0.0f ? RoundClamp(scale[g] / d, -128, 127) : 0;
      b[i].scales[g] = static_cast<int8_t>(sc);
      const float dd = d * static_cast<float>(sc);
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * g + l, half = e / 128, r = e % 128;
        const int q = (dd != 0.0f ? RoundClamp(x[e] / dd, -32, 31) : 0) + 32;
        b[i].ql[64 * half + r % 64] |= static_cast<uint8_t>((q & 0x0f) << (4 * (r / 64)));
        b[i].qh[32 * half + r % 32] |= static_cast<uint8_t>(((q >> 4) & 3) << (2 * (r / 32)));
      }
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
    case DType::kQ5_0: DequantBlocks<DType::kQ5_0>(src, dst, n); return;
    case DType::kQ5_1: DequantBlocks<DType::kQ5_1>(src, dst, n); return;
    case DType::kQ2_K: DequantBlocks<DType::kQ2_K>(src, dst, n); return;
    case DType::kQ3_K: DequantBlocks<DType::kQ3_K>(src, dst, n); return;
    case DType::kQ4_K: DequantBlocks<DType::kQ4_K>(src, dst, n); return;
    case DType::kQ5_K: DequantBlocks<DType::kQ5_K>(src, dst, n); return;
    case DType::kQ6_K: DequantBlocks<DType::kQ6_K>(src, dst, n); return;
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
    case DType::kQ5_0: QuantQ5_0(src, static_cast<BlockQ5_0*>(dst), n / 32); return;
    case DType::kQ5_1: QuantQ5_1(src, static_cast<BlockQ5_1*>(dst), n / 32); return;
    case DType::kQ2_K: QuantQ2_K(src, static_cast<BlockQ2_K*>(dst), n / 256); return;
    case DType::kQ3_K: QuantQ3_K(src, static_cast<BlockQ3_K*>(dst), n / 256); return;
    case DType::kQ4_K: QuantQ4_K(src, static_cast<BlockQ4_K*>(dst), n / 256); return;
    case DType::kQ5_K: QuantQ5_K(src, static_cast<BlockQ5_K*>(dst), n / 256); return;
    case DType::kQ6_K: QuantQ6_K(src, static_cast<BlockQ6_K*>(dst), n / 256); return;
  }
}

}  // namespace kvfleet::kernels
