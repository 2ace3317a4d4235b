// Q5_1 on the device: a chunk is a block (f16 d, f16 m, 4 bytes of fifth
// bits, 16 bytes of nibbles); q · d + m fused.
#pragma once

#include "kernels/cuda/formats/device_format.cuh"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <>
struct DeviceFormat<DType::kQ5_1> {
  static constexpr int kElements = 32;
  static __device__ __forceinline__ void LoadChunk(const uint8_t* row, int64_t c, float* out) {
    const uint8_t* p = row + c * Traits(DType::kQ5_1).block_bytes;
    const float d = HalfAt(p), m = HalfAt(p + 2);
    const uint32_t qh = static_cast<uint32_t>(LoadU16(p + 4)) | (static_cast<uint32_t>(LoadU16(p + 6)) << 16);
    KVFLEET_UNROLL
    for (int i = 0; i < 16; ++i) {
      const int lo = (p[8 + i] & 0x0f) | (((qh >> i) & 1) << 4);
      const int hi = (p[8 + i] >> 4) | (((qh >> (i + 16)) & 1) << 4);
      out[i] = __fmaf_rn(static_cast<float>(lo), d, m);
      out[16 + i] = __fmaf_rn(static_cast<float>(hi), d, m);
    }
  }
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
