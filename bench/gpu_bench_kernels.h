// The device's own ceilings, measured in the same run as everything
// gpu_bench reports against them: a read-only kernel (a sum over a large
// buffer: bytes read per second) and a device-to-device copy (bytes read
// plus written per second).
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"
#include "kernels/cuda/stream.h"

namespace kvfleet::bench {
inline namespace KVFLEET_CUDA_BUILD {

struct MeasuredBandwidth {
  double read_bytes_per_s = 0;  // the read-only sum
  double copy_bytes_per_s = 0;  // cudaMemcpy on the device, read + written
};

// Over a buffer of `bytes` (a few GB: far past the L2), median of `repeats`.
absl::StatusOr<MeasuredBandwidth> MeasureBandwidth(size_t bytes, int repeats);

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::bench
