// Device-side dequantization of weight rows stored in their GGUF type: the
// same values as kernels/cpu's DequantizeRow, bit for bit (the same float
// operations: q·d, (q − 8)·d, q·d + m fused), so the CUDA backend sees the
// weights the CPU backend sees.
//
// A lane reads a row one chunk at a time: a whole 32-element block for the
// quantized types, 8 elements (16 or 32 bytes) for the float types, so a
// warp's loads are contiguous. kChunkElements is part of the matmul's fixed
// reduction order.
#pragma once

#include "common/dtype.h"
#include "kernels/cuda/cuda_compat.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <DType T>
struct WeightChunk {
  static constexpr int kElements = (T == DType::kQ8_0 || T == DType::kQ4_0 || T == DType::kQ4_1) ? 32 : 8;
  static constexpr int64_t kBytes = kElements / Traits(T).block_elems * Traits(T).block_bytes;
};

__device__ __forceinline__ uint16_t LoadU16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }

// Chunk `c` of a row (elements [c·kElements, (c+1)·kElements)) into out[], in element order.
template <DType T>
__device__ __forceinline__ void LoadWeightChunk(const uint8_t* row, int64_t c, float* out) {
  const uint8_t* p = row + c * WeightChunk<T>::kBytes;
  if constexpr (T == DType::kF32) {
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

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
