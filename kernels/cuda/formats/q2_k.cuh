// Q2_K on the device: a chunk is sub-block j of super-block c / 8
// (scales[16] of scale | min << 4, qs[64], d, dmin); (d · scale) · q − dmin · min.
#pragma once

#include "kernels/cuda/formats/device_format.cuh"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <>
struct DeviceFormat<DType::kQ2_K> {
  static constexpr int kElements = 32;
  static __device__ __forceinline__ void LoadChunk(const uint8_t* row, int64_t c, float* out) {
    const uint8_t* s = row + (c / 8) * Traits(DType::kQ2_K).block_bytes;
    const int j = static_cast<int>(c % 8);
    const float d = HalfAt(s + 80), dmin = HalfAt(s + 82);
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
  }
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
