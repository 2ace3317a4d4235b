// What every weight format's CUDA file (kernels/cuda/formats/<name>.cuh)
// is written against: DeviceFormat<T>, one specialization per type, with
//   static constexpr int kElements;  // values per chunk: 8 (plain floats) or 32
//   static __device__ void LoadChunk(const uint8_t* row, int64_t c, float* out);
// chunk c of a row (elements [c·kElements, (c+1)·kElements)) into out[], in
// element order: the same values as the CPU's CpuFormat<T>::Reader, bit for
// bit (the same float operations, written with the _rn intrinsics so nvcc
// fuses nothing the CPU does not).
//
// A lane reads a row one chunk at a time: a whole 32-element block for the
// quantized types (a K-quant's sub-block), 8 elements (16 or 32 bytes) for
// the float types, so a warp's loads are contiguous. kElements is part of
// the matmul's fixed reduction order.
#pragma once

#include "common/dtype.h"
#include "kernels/cuda/cuda_compat.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <DType T>
struct DeviceFormat;  // one specialization per weight type, in kernels/cuda/formats/

__device__ __forceinline__ uint16_t LoadU16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
__device__ __forceinline__ float HalfAt(const uint8_t* p) { return ::kvfleet::cuda::HalfBitsToFloat(LoadU16(p)); }

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
