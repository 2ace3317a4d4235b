// Q6_K on the device: a chunk is sub-block j of super-block c / 8 (ql[128],
// qh[64], 16 int8 scales, d); (d · scale) · (q − 32).
#pragma once

#include "kernels/cuda/formats/device_format.cuh"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <>
struct DeviceFormat<DType::kQ6_K> {
  static constexpr int kElements = 32;
  static __device__ __forceinline__ void LoadChunk(const uint8_t* row, int64_t c, float* out) {
    const uint8_t* s = row + (c / 8) * Traits(DType::kQ6_K).block_bytes;
    const int j = static_cast<int>(c % 8), half = j / 4, quarter = j % 4;
    const uint8_t* ql = s + 64 * half + 32 * (quarter % 2);
    const uint8_t* qh = s + 128 + 32 * half;
    const float d = HalfAt(s + 208);
    const float d0 = __fmul_rn(d, static_cast<float>(static_cast<int8_t>(s[192 + 2 * j])));
    const float d1 = __fmul_rn(d, static_cast<float>(static_cast<int8_t>(s[192 + 2 * j + 1])));
    KVFLEET_UNROLL
    for (int i = 0; i < 32; ++i) {
      const int q = ((ql[i] >> (4 * (quarter / 2))) & 0x0f) | (((qh[i] >> (2 * quarter)) & 3) << 4);
      out[i] = __fmul_rn(i < 16 ? d0 : d1, static_cast<float>(q - 32));
    }
  }
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
