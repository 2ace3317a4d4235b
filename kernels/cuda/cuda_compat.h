// What every kernels/cuda source includes first: the CUDA headers under
// nvcc, or the host emulation (emulation/emulated_cuda.h) when the same
// source is compiled as C++ for CI. Also the few device helpers both builds
// define identically: float16 and bfloat16 conversions, and the launch and
// unroll spellings.
//
//   KVFLEET_LAUNCH(kernel, grid, block, shared_bytes, stream, params);
#pragma once

#include <cstdint>

#include "kernels/cuda/stream.h"

#if defined(KVFLEET_CUDA_EMULATION)
#include "common/float16.h"
#include "kernels/cuda/emulation/emulated_cuda.h"  // layering: the emulated build only
#define KVFLEET_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  KVFLEET_EMULATED_LAUNCH(kernel, grid, block, shared_bytes, stream, __VA_ARGS__)
#define KVFLEET_UNROLL
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define KVFLEET_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  kernel<<<(grid), (block), (shared_bytes), (stream)>>>(__VA_ARGS__)
#define KVFLEET_UNROLL _Pragma("unroll")
#endif

namespace kvfleet::cuda {
inline namespace KVFLEET_CUDA_BUILD {

// IEEE binary16 bits to float and back (round to nearest even): exact
// conversions, bit-identical on the GPU, in the emulation and in kernels/cpu.
__device__ __forceinline__ float HalfBitsToFloat(uint16_t h) {
#if defined(KVFLEET_CUDA_EMULATION)
  return ::kvfleet::HalfToFloat(h);
#else
  return __half2float(__ushort_as_half(h));
#endif
}

__device__ __forceinline__ uint16_t FloatToHalfBits(float f) {
#if defined(KVFLEET_CUDA_EMULATION)
  return ::kvfleet::FloatToHalf(f);
#else
  return __half_as_ushort(__float2half_rn(f));
#endif
}

__device__ __forceinline__ float Bf16BitsToFloat(uint16_t b) {
#if defined(KVFLEET_CUDA_EMULATION)
  return ::kvfleet::Bf16ToFloat(b);
#else
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
#endif
}

// The sum of `value` over the `lanes` lanes of an aligned group of the warp
// (lanes a power of two, at most 32), by a butterfly of xor shuffles. IEEE
// addition is commutative, so every lane of the group ends with the same
// bits, and the association order depends only on `lanes`: the fixed tree
// every reduction here uses. Every lane of the warp must call it.
__device__ __forceinline__ float GroupSum(float value, int lanes) {
#if defined(KVFLEET_CUDA_EMULATION)
  return ::kvfleet::cuda_emu::ButterflySum(value, lanes);
#else
  for (int offset = lanes / 2; offset > 0; offset /= 2) {
    value = __fadd_rn(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
#endif
}

__device__ __forceinline__ float GroupMax(float value, int lanes) {
#if defined(KVFLEET_CUDA_EMULATION)
  return ::kvfleet::cuda_emu::ButterflyMax(value, lanes);
#else
  for (int offset = lanes / 2; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
#endif
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::cuda
