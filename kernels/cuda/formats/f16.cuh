// F16 on the device: 8 values (16 bytes) per chunk.
#pragma once

#include "kernels/cuda/formats/device_format.cuh"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <>
struct DeviceFormat<DType::kF16> {
  static constexpr int kElements = 8;
  static __device__ __forceinline__ void LoadChunk(const uint8_t* row, int64_t c, float* out) {
    const uint4 v = *reinterpret_cast<const uint4*>(row + c * 16);
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
    KVFLEET_UNROLL
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = ::kvfleet::cuda::HalfBitsToFloat(static_cast<uint16_t>(words[i] & 0xffffu));
      out[2 * i + 1] = ::kvfleet::cuda::HalfBitsToFloat(static_cast<uint16_t>(words[i] >> 16));
    }
  }
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
