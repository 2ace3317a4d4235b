// Q4_1 on the device: a chunk is a block (f16 d, f16 m, 16 bytes of nibbles
// as Q4_0's; 4-byte aligned); q · d + m fused.
#pragma once

#include "kernels/cuda/formats/device_format.cuh"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <>
struct DeviceFormat<DType::kQ4_1> {
  static constexpr int kElements = 32;
  static __device__ __forceinline__ void LoadChunk(const uint8_t* row, int64_t c, float* out) {
    const uint8_t* p = row + c * Traits(DType::kQ4_1).block_bytes;
    const float d = HalfAt(p), m = HalfAt(p + 2);
    KVFLEET_UNROLL
    for (int i = 0; i < 8; ++i) {
      const uint16_t two = LoadU16(p + 4 + 2 * i);
      const int b0 = two & 0xff, b1 = two >> 8;
      out[2 * i] = __fmaf_rn(static_cast<float>(b0 & 0x0f), d, m);
      out[2 * i + 1] = __fmaf_rn(static_cast<float>(b1 & 0x0f), d, m);
      out[16 + 2 * i] = __fmaf_rn(static_cast<float>(b0 >> 4), d, m);
      out[16 + 2 * i + 1] = __fmaf_rn(static_cast<float>(b1 >> 4), d, m);
    }
  }
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
