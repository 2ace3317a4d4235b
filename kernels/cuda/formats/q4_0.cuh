// Q4_0 on the device: a chunk is a block (f16 d, 16 bytes of nibbles; 2-byte
// aligned; element i the low nibble of byte i, i + 16 the high one); (q − 8) · d.
#pragma once

#include "kernels/cuda/formats/device_format.cuh"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

template <>
struct DeviceFormat<DType::kQ4_0> {
  static constexpr int kElements = 32;
  static __device__ __forceinline__ void LoadChunk(const uint8_t* row, int64_t c, float* out) {
    const uint8_t* p = row + c * Traits(DType::kQ4_0).block_bytes;
    const float d = HalfAt(p);
    KVFLEET_UNROLL
    for (int i = 0; i < 8; ++i) {
      const uint16_t two = LoadU16(p + 2 + 2 * i);
      const int b0 = two & 0xff, b1 = two >> 8;
      out[2 * i] = __fmul_rn(static_cast<float>(b0 & 0x0f) - 8.0f, d);
      out[2 * i + 1] = __fmul_rn(static_cast<float>(b1 & 0x0f) - 8.0f, d);
      out[16 + 2 * i] = __fmul_rn(static_cast<float>(b0 >> 4) - 8.0f, d);
      out[16 + 2 * i + 1] = __fmul_rn(static_cast<float>(b1 >> 4) - 8.0f, d);
    }
  }
};

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
