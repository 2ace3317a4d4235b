// Device-side dequantization of weight rows stored in their GGUF type: the
// same values as kernels/cpu's DequantizeRow, bit for bit (the same float
// operations: q·d, (q − 8)·d, q·d + m fused, (q − 16)·d, (d·scale)·q − dmin·min,
// (d·scale)·(q − 4), (d·scale)·(q − 32)), so the CUDA backend sees the weights
// the CPU backend sees.
//
// A lane reads a row one chunk at a time: a whole 32-element block for the
// quantized types (a K-quant's sub-block), 8 elements (16 or 32 bytes) for
// the float types, so a warp's loads are contiguous. kElements is part of
// the matmul's fixed reduction order.
#pragma once

#include "common/dtype.h"
#include "kernels/cuda/cuda_compat.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <DType T>
struct WeightChunk {
  static constexpr bool kFloat = T == DType::kF32 || T == DType::kF16 || T == DType::kBF16;
  static constexpr int kElements = kFloat ? 8 : 32;
  // The bytes of chunk c start at c · kBytes (not for the K-quants: their
  // chunks are sub-blocks of a super-block).
  static constexpr int64_t kBytes = kElements * Traits(T).block_bytes / Traits(T).block_elems;
};

__device__ __forceinline__ uint16_t LoadU16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }

// The chunk at p of a type whose chunks are contiguous.
template <DType T>
__device__ __forceinline__ void LoadBlockChunk(const uint8_t* p, float* out) {
  if constexpr (T == DType::kQ5_0) {
    // f16 scale, 4 bytes of fifth bits, 16 bytes of nibbles; 2-byte aligned.
    const float d = ::kvfleet::cuda::HalfBitsToFloat(LoadU16(p));
    const uint32_t qh = static_cast<uint32_t>(LoadU16(p + 2)) | (static_cast<uint32_t>(LoadU16(p + 4)) << 16);
    KVFLEET_UNROLL
    for (int i = 0; i < 16; ++i) {
      const int lo = (p[6 + i] & 0x0f) | (((qh >> i) & 1) << 4);
      const int hi = (p[6 + i] >> 4) | (((qh >> (i + 16)) & 1) << 4);
      out[i] = __fmul_rn(static_cast<float>(lo - 16), d);
      out[16 + i] = __fmul_rn(static_cast<float>(hi - 16), d);
    }
  } else if constexpr (T == DType::kQ5_1) {
    // f16 scale, f16 min, 4 bytes of fifth bits, 16 bytes of nibbles; q · d + m fused.
    const float d = ::kvfleet::cuda::HalfBitsToFloat(LoadU16(p));
    const float m = ::kvfleet::cuda::HalfBitsToFloat(LoadU16(p + 2));
    const uint32_t qh = static_cast<uint32_t>(LoadU16(p + 4)) | (static_cast<uint32_t>(LoadU16(p + 6)) << 16);
    KVFLEET_UNROLL
    for (int i = 0; i < 16; ++i) {
      const int lo = (p[8 + i] & 0x0f) | (((qh >> i) & 1) << 4);
      const int hi = (p[8 + i] >> 4) | (((qh >> (i + 16)) & 1) << 4);
      out[i] = __fmaf_rn(static_cast<float>(lo), d, m);
      out[16 + i] = __fmaf_rn(static_cast<float>(hi), d, m);
    }
  } else if constexpr (T == DType::kF32) {
    const float4 a = *reinterpret_cast<const float4*>(p);
    const float4 b = *reinterpret_cast<const float4*>(p + 16);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  } else if constexpr (T == DType::kF16 || T == DType::kBF16) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
    KVFLEET_UNROLL
    for (int i = 0; i < 4; ++i) {
      const uint16_t lo = static_cast<uint16_t>(words[i] & 0xffffu), hi = static_cast<uint16_t>(words[i] >> 16);
      if constexpr (T == DType::kF16) {
        out[2 * i] = ::kvfleet::cuda::HalfBitsToFloat(lo);
        out[2 * i + 1] = ::kvfleet::cuda::HalfBitsToFloat(hi);
      } else {
        out[2 * i] = ::kvfleet::cuda::Bf16BitsToFloat(lo);
        out[2 * i + 1] = ::kvfleet::cuda::Bf16BitsToFloat(hi);
      }
    }
  } else if constexpr (T == DType::kQ8_0) {
    // f16 scale, 32 × int8; 2-byte aligned.
    const float d = ::kvfleet::cuda::HalfBitsToFloat(LoadU16(p));
    KVFLEET_UNROLL
    for (int i = 0; i < 16; ++i) {
      const uint16_t two = LoadU16(p + 2 + 2 * i);
      out[2 * i] = __fmul_rn(static_cast<float>(static_cast<int8_t>(two & 0xff)), d);
      out[2 * i + 1] = __fmul_rn(static_cast<float>(static_cast<int8_t>(two >> 8)), d);
    }
  } else {
    // Q4_0: f16 scale, 16 bytes of nibbles (2-byte aligned); Q4_1: f16 scale,
    // f16 minimum, nibbles (4-byte aligned). Element i is the low nibble of
    // byte i, element i + 16 the high one.
    const float d = ::kvfleet::cuda::HalfBitsToFloat(LoadU16(p));
    const int qs_offset = T == DType::kQ4_0 ? 2 : 4;
    float m = 0.0f;
    if constexpr (T == DType::kQ4_1) m = ::kvfleet::cuda::HalfBitsToFloat(LoadU16(p + 2));
    KVFLEET_UNROLL
    for (int i = 0; i < 8; ++i) {
      const uint16_t two = LoadU16(p + qs_offset + 2 * i);
      const int b0 = two & 0xff, b1 = two >> 8;
      const float q_lo0 = static_cast<float>(b0 & 0x0f), q_hi0 = static_cast<float>(b0 >> 4);
      const float q_lo1 = static_cast<float>(b1 & 0x0f), q_hi1 = static_cast<float>(b1 >> 4);
      if constexpr (T == DType::kQ4_0) {
        out[2 * i] = __fmul_rn(q_lo0 - 8.0f, d);
        out[2 * i + 1] = __fmul_rn(q_lo1 - 8.0f, d);
        out[16 + 2 * i] = __fmul_rn(q_hi0 - 8.0f, d);
        out[16 + 2 * i + 1] = __fmul_rn(q_hi1 - 8.0f, d);
      } else {
        out[2 * i] = __fmaf_rn(q_lo0, d, m);
        out[2 * i + 1] = __fmaf_rn(q_lo1, d, m);
        out[16 + 2 * i] = __fmaf_rn(q_hi0, d, m);
        out[16 + 2 * i + 1] = __fmaf_rn(q_hi1, d, m);
      }
    }
  }
}

// Chunk `c` of a row (elements [c·kElements, (c+1)·kElements)) into out[], in element order.
template <DType T>
__device__ __forceinline__ void LoadWeightChunk(const uint8_t* row, int64_t c, float* out) {
  if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
    // Sub-block j of super-block c / 8: d, dmin, 12 bytes of scales, (Q5_K: 32 bytes of fifth bits,) 128 of nibbles.
    const uint8_t* s = row + (c / 8) * Traits(T).block_bytes;
    const int j = static_cast<int>(c % 8);
    const uint8_t* sc = s + 4;
    const int scale = j < 4 ? (sc[j] & 63) : ((sc[j + 4] & 0x0f) | ((sc[j - 4] >> 6) << 4));
    const int min = j < 4 ? (sc[j + 4] & 63) : ((sc[j + 4] >> 4) | ((sc[j] >> 6) << 4));
    const float d = __fmul_rn(::kvfleet::cuda::HalfBitsToFloat(LoadU16(s)), static_cast<float>(scale));
    const float m = __fmul_rn(::kvfleet::cuda::HalfBitsToFloat(LoadU16(s + 2)), static_cast<float>(min));
    constexpr int kQsOffset = T == DType::kQ5_K ? 48 : 16;
    const uint8_t* qh = s + 16;
    const uint8_t* qs = s + kQsOffset + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    KVFLEET_UNROLL
    for (int i = 0; i < 32; ++i) {
      int q = (qs[i] >> shift) & 0x0f;
      if constexpr (T == DType::kQ5_K) q |= ((qh[i] >> j) & 1) << 4;
      out[i] = __fsub_rn(__fmul_rn(d, static_cast<float>(q)), m);
    }
  } else if constexpr (T == DType::kQ2_K) {
    // Sub-block j of super-block c / 8: scales[16] (scale | min << 4), qs[64], d, dmin.
    const uint8_t* s = row + (c / 8) * Traits(T).block_bytes;
    const int j = static_cast<int>(c % 8);
    const float d = ::kvfleet::cuda::HalfBitsToFloat(LoadU16(s + 80));
    const float dmin = ::kvfleet::cuda::HalfBitsToFloat(LoadU16(s + 82));
    const uint8_t* qs = s + 16 + 32 * (j / 4);
    const int shift = 2 * (j % 4);
    KVFLEET_UNROLL
    for (int h = 0; h < 2; ++h) {
      const uint8_t packed = s[2 * j + h];
      const float dl = __fmul_rn(d, static_cast<float>(packed & 0x0f));
      const float ml = __fmul_rn(dmin, static_cast<float>(packed >> 4));
      KVFLEET_UNROLL
      for (int i = 16 * h; i < 16 * h + 16; ++i) {
        out[i] = __fsub_rn(__fmul_rn(dl, static_cast<float>((qs[i] >> shift) & 3)), ml);
      }
    }
  } else if constexpr (T == DType::kQ3_K) {
    // Sub-block j of super-block c / 8: hmask[32], qs[64], scales[12], d.
    const uint8_t* s = row + (c / 8) * Traits(T).block_bytes;
    const int j = static_cast<int>(c % 8);
    const float d = ::kvfleet::cuda::HalfBitsToFloat(LoadU16(s + 108));
    const uint8_t* qs = s + 32 + 32 * (j / 4);
    const uint8_t* sc = s + 96;
    const int shift = 2 * (j % 4);
    KVFLEET_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int g = 2 * j + h;
      const int scale = (((sc[g % 8] >> (4 * (g / 8))) & 0x0f) | (((sc[8 + g % 4] >> (2 * (g / 4))) & 3) << 4)) - 32;
      const float dl = __fmul_rn(d, static_cast<float>(scale));
      KVFLEET_UNROLL
      for (int i = 16 * h; i < 16 * h + 16; ++i) {
        const int q = (((qs[i] >> shift) & 3) | (((s[i] >> j) & 1) << 2)) - 4;
        out[i] = __fmul_rn(dl, static_cast<float>(q));
      }
    }
  } else if constexpr (T == DType::kQ6_K) {
    // Sub-block j of super-block c / 8: ql[128], qh[64], 16 int8 scales, d.
    const uint8_t* s = row + (c / 8) * Traits(T).block_bytes;
    const int j = static_cast<int>(c % 8), half = j / 4, quarter = j % 4;
    const uint8_t* ql = s + 64 * half + 32 * (quarter % 2);
    const uint8_t* qh = s + 128 + 32 * half;
    const float d = ::kvfleet::cuda::HalfBitsToFloat(LoadU16(s + 208));
    const float d0 = __fmul_rn(d, static_cast<float>(static_cast<int8_t>(s[192 + 2 * j])));
    const float d1 = __fmul_rn(d, static_cast<float>(static_cast<int8_t>(s[192 + 2 * j + 1])));
    KVFLEET_UNROLL
    for (int i = 0; i < 32; ++i) {
      const int q = ((ql[i] >> (4 * (quarter / 2))) & 0x0f) | (((qh[i] >> (2 * quarter)) & 3) << 4);
      out[i] = __fmul_rn(i < 16 ? d0 : d1, static_cast<float>(q - 32));
    }
  } else {
    LoadBlockChunk<T>(row + c * WeightChunk<T>::kBytes, out);
  }
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
