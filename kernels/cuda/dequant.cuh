// Device-side dequantization of weight rows stored in their GGUF type, one
// file per type (formats/): the same values as kernels/cpu's DequantizeRow,
// bit for bit, so the CUDA backend sees the weights the CPU backend sees.
//
//   float w[WeightChunk<T>::kElements];
//   LoadWeightChunk<T>(row, c, w);  // elements [c·kElements, (c+1)·kElements)
#pragma once

#include "common/dtype.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/cuda/formats/all_formats.cuh"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <DType T>
struct WeightChunk {
  static constexpr int kElements = DeviceFormat<T>::kElements;
};

// Chunk `c` of a row (elements [c·kElements, (c+1)·kElements)) into out[], in element order.
template <DType T>
__device__ __forceinline__ void LoadWeightChunk(const uint8_t* row, int64_t c, float* out) {
  DeviceFormat<T>::LoadChunk(row, c, out);
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
