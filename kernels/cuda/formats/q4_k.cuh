// Q4_K on the device (Q5_K, q5_k.cuh, adds a fifth bit): a chunk is
// sub-block j of super-block c / 8 (d, dmin, 12 bytes of scales, [Q5_K: 32
// bytes of fifth bits,] 128 of nibbles); (d · scale) · q − dmin · min.
#pragma once

#include "kernels/cuda/formats/device_format.cuh"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

// Sub-block j of a Q4_K (kFifthBits false) or Q5_K super-block at s.
template <bool kFifthBits>
__device__ __forceinline__ void LoadQ4KSubBlock(const uint8_t* s, int j, float* out) {
  const uint8_t* sc = s + 4;
  const int scale = j < 4 ? (sc[j] & 63) : ((sc[j + 4] & 0x0f) | ((sc[j - 4] >> 6) << 4));
  const int min = j < 4 ? (sc[j + 4] & 63) : ((sc[j + 4] >> 4) | ((sc[j] >> 6) << 4));
  const float d = __fmul_rn(HalfAt(s), static_cast<float>(scale));
  const float m = __fmul_rn(HalfAt(s + 2), static_cast<float>(min));
  const uint8_t* qh = s + 16;
  const uint8_t* qs = s + (kFifthBits ? 48 : 16) + 32 * (j / 2);
  const int shift = 4 * (j % 2);
  KVFLEET_UNROLL
  for (int i = 0; i < 32; ++i) {
    int q = (qs[i] >> shift) & 0x0f;
    if constexpr (kFifthBits) q |= ((qh[i] >> j) & 1) << 4;
    out[i] = __fsub_rn(__fmul_rn(d, static_cast<float>(q)), m);
  }
}

template <>
struct DeviceFormat<DType::kQ4_K> {
  static constexpr int kElements = 32;
  static __device__ __forceinline__ void LoadChunk(const uint8_t* row, int64_t c, float* out) {
    LoadQ4KSubBlock<false>(row + (c / 8) * Traits(DType::kQ4_K).block_bytes, static_cast<int>(c % 8), out);
  }
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
