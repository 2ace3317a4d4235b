#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/gpu_bench_kernels.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/cuda/device_buffer.h"

namespace kvfleet::bench {
inline namespace KVFLEET_CUDA_BUILD {
namespace {

namespace cu = ::kvfleet::cuda;
constexpr int kThreads = 256;

// Each thread sums float4s grid-stride; the block's sum goes to out, so the
// reads cannot be optimised away.
__global__ void ReadSumKernel(const float4* data, size_t n, float* out) {
  __shared__ float partial[kThreads];
  float sum = 0.0f;
  for (size_t i = blockIdx.x * static_cast<size_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * kThreads) {
    const float4 v = __ldg(data + i);
    sum += v.x + v.y + v.z + v.w;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

template <typename Fn>
absl::StatusOr<double> MedianSeconds(int repeats, Fn fn) {
  std::vector<double> times;
  for (int r = 0; r <= repeats; ++r) {  // the first run warms up
    const auto t0 = std::chrono::steady_clock::now();
    if (absl::Status s = fn(); !s.ok()) return s;
    if (absl::Status s = cu::Synchronize(nullptr); !s.ok()) return s;
    if (r > 0) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

absl::StatusOr<MeasuredBandwidth> MeasureBandwidth(size_t bytes, int repeats) {
  absl::StatusOr<cu::DeviceProperties> props = cu::GetDeviceProperties(0);
  if (!props.ok()) return props.status();
  const unsigned blocks = static_cast<unsigned>(props->multiprocessors * 8);
  absl::StatusOr<cu::DeviceBuffer> a = cu::DeviceBuffer::Allocate(bytes);
  absl::StatusOr<cu::DeviceBuffer> b = a.ok() ? cu::DeviceBuffer::Allocate(bytes) : a.status();
  absl::StatusOr<cu::DeviceBuffer> out = b.ok() ? cu::DeviceBuffer::Allocate(blocks * sizeof(float)) : b.status();
  if (!out.ok()) return out.status();
  // A non-zero pattern: zeros can read faster than data.
  if (absl::Status s = cu::Memset(a->get(), 0x3c, bytes, nullptr); !s.ok()) return s;
  const size_t n = bytes / sizeof(float4);
  const float4* data = a->as<const float4>();
  float* sums = out->as<float>();
  auto* kernel = &ReadSumKernel;
  absl::StatusOr<double> read = MedianSeconds(repeats, [&] {
    KVFLEET_LAUNCH(kernel, dim3(blocks), dim3(kThreads), 0, nullptr, data, n, sums);
    return cu::CheckLaunches("the read-bandwidth kernel");
  });
  if (!read.ok()) return read.status();
  absl::StatusOr<double> copy =
      MedianSeconds(repeats, [&] { return cu::CopyOnDevice(b->get(), a->get(), bytes, nullptr); });
  if (!copy.ok()) return copy.status();
  return MeasuredBandwidth{.read_bytes_per_s = static_cast<double>(bytes) / *read,
                           .copy_bytes_per_s = 2.0 * static_cast<double>(bytes) / *copy};
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::bench
