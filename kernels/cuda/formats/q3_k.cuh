// Q3_K on the device: a chunk is sub-block j of super-block c / 8
// (hmask[32], qs[64], scales[12], d); (d · (scale − 32)) · (q − 4).
#pragma once

#include "kernels/cuda/formats/device_format.cuh"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <>
struct DeviceFormat<DType::kQ3_K> {
  static constexpr int kElements = 32;
  static __device__ __forceinline__ void LoadChunk(const uint8_t* row, int64_t c, float* out) {
    const uint8_t* s = row + (c / 8) * Traits(DType::kQ3_K).block_bytes;
    const int j = static_cast<int>(c % 8);
    const float d = HalfAt(s + 108);
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
  }
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
