// Q8_0 on the device: a chunk is a block (f16 d, 32 × int8; 2-byte aligned); q · d.
#pragma once

#include "kernels/cuda/formats/device_format.cuh"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <>
struct DeviceFormat<DType::kQ8_0> {
  static constexpr int kElements = 32;
  static __device__ __forceinline__ void LoadChunk(const uint8_t* row, int64_t c, float* out) {
    const uint8_t* p = row + c * Traits(DType::kQ8_0).block_bytes;
    const float d = HalfAt(p);
    KVFLEET_UNROLL
    for (int i = 0; i < 16; ++i) {
      const uint16_t two = LoadU16(p + 2 + 2 * i);
      out[2 * i] = __fmul_rn(static_cast<float>(static_cast<int8_t>(two & 0xff)), d);
      out[2 * i + 1] = __fmul_rn(static_cast<float>(static_cast<int8_t>(two >> 8)), d);
    }
  }
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
