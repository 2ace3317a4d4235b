// The host emulation of the CUDA thread model that runs kernels/cuda in CI:
// barriers order shared-memory traffic, shuffles and the butterflies give
// the device's results, and a barrier some threads never reach aborts.
#include "kernels/cuda/emulation/emulated_cuda.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kernels/cuda/cuda_compat.h"

namespace kvfleet::cuda_emu {
namespace {

// out[b][i] = Σ in[b][*] computed by thread i after a barrier: wrong (a
// partial sum) without the barrier, whichever order the fibers run in.
__global__ void BlockSum(const float* in, float* out) {
  __shared__ float shared[128];
  const int t = static_cast<int>(threadIdx.x);
  shared[t] = in[blockIdx.x * 128 + t];
  __syncthreads();
  float sum = 0;
  for (int i = 0; i < 128; ++i) sum += shared[i];
  __syncthreads();
  out[blockIdx.x * 128 + t] = sum;
}

TEST(EmulatedCudaTest, BarriersMakeEveryThreadSeeTheWholeBlocksWrites) {
  for (const bool reversed : {false, true}) {
    SetReverseOrder(reversed);
    std::vector<float> in(3 * 128), out(3 * 128, -1.0f);
    std::iota(in.begin(), in.end(), 0.0f);
    Launch(Dim3(3), Dim3(128), 0, [&] { BlockSum(in.data(), out.data()); });
    for (int b = 0; b < 3; ++b) {
      const float want = std::accumulate(in.begin() + b * 128, in.begin() + (b + 1) * 128, 0.0f);
      for (int t = 0; t < 128; ++t) ASSERT_EQ(out[b * 128 + t], want) << "block " << b << " thread " << t;
    }
  }
  SetReverseOrder(false);
}

TEST(EmulatedCudaTest, ShufflesAndButterfliesMatchTheDevicesExchanges) {
  std::vector<float> xor_got(64), sum_got(64), group_got(64);
  Launch(Dim3(1), Dim3(64), 0, [&] {
    const int t = static_cast<int>(threadIdx.x);
    const float v = static_cast<float>(t) * 0.37f + 1.0f / (1 + t);
    xor_got[t] = __shfl_xor_sync(0xffffffffu, v, 5);
    sum_got[t] = cuda::GroupSum(v, 32);
    group_got[t] = cuda::GroupSum(v, 8);
  });
  for (int t = 0; t < 64; ++t) {
    const auto value = [](int l) { return static_cast<float>(l) * 0.37f + 1.0f / (1 + l); };
    const int warp = t / 32 * 32, lane = t % 32;
    EXPECT_EQ(xor_got[t], value(warp + (lane ^ 5)));
    // The butterfly as a device runs it: v += shfl_xor(v, o) for o = n/2 .. 1.
    for (const auto& [lanes, got] : {std::pair{32, &sum_got}, std::pair{8, &group_got}}) {
      std::vector<float> v(32);
      for (int l = 0; l < 32; ++l) v[l] = value(warp + l);
      for (int o = lanes / 2; o > 0; o /= 2) {
        std::vector<float> next(32);
        for (int l = 0; l < 32; ++l) next[l] = v[l] + v[l ^ o];
        v = next;
      }
      EXPECT_EQ((*got)[t], v[lane]) << lanes << " lanes, thread " << t;
    }
  }
}

TEST(EmulatedCudaTest, ABarrierSomeThreadsNeverReachIsADeadlockNotAHang) {
  // Half of warp 1 shuffles, waiting for its other half, which waits at the
  // block barrier for the first half.
  EXPECT_DEATH(Launch(Dim3(1), Dim3(64), 0,
                      [] {
                        if (threadIdx.x >= 32 && threadIdx.x < 48) __shfl_xor_sync(0xffffffffu, 1.0f, 1);
                        __syncthreads();
                      }),
               "deadlock");
}

}  // namespace
}  // namespace kvfleet::cuda_emu
