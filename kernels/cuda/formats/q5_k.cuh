// Q5_K on the device: Q4_K's sub-block with a fifth bit from qh (q4_k.cuh).
#pragma once

#include "kernels/cuda/formats/device_format.cuh"
#include "kernels/cuda/formats/q4_k.cuh"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <>
struct DeviceFormat<DType::kQ5_K> {
  static constexpr int kElements = 32;
  static __device__ __forceinline__ void LoadChunk(const uint8_t* row, int64_t c, float* out) {
    LoadQ4KSubBlock<true>(row + (c / 8) * Traits(DType::kQ5_K).block_bytes, static_cast<int>(c % 8), out);
  }
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
