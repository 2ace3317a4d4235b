// F32 on the device: 8 values (32 bytes) per chunk.
#pragma once

#include "kernels/cuda/formats/device_format.cuh"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <>
struct DeviceFormat<DType::kF32> {
  static constexpr int kElements = 8;
  static __device__ __forceinline__ void LoadChunk(const uint8_t* row, int64_t c, float* out) {
    const uint8_t* p = row + c * 32;
    const float4 a = *reinterpret_cast<const float4*>(p);
    const float4 b = *reinterpret_cast<const float4*>(p + 16);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  }
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
