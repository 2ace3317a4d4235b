// A host emulation of the CUDA thread model, so CI machines without a GPU
// run every kernel of kernels/cuda from the same source: the .cu files are
// compiled a second time as C++ against this header (cuda_compat.h picks it
// when KVFLEET_CUDA_EMULATION is defined).
//
// A launch runs its blocks one after another on the calling thread. Each
// CUDA thread of a block is a fiber with its own stack; __syncthreads and
// the warp primitives (__shfl_*_sync, __syncwarp) switch fibers until every
// live thread of the block (or warp) has arrived, so kernels that rely on
// barriers behave as on a GPU, and a barrier not every thread reaches
// aborts with a message instead of hanging. __shared__ variables are static
// (one block runs at a time). Fibers run in a fixed order that can be
// reversed (SetReverseOrder) to expose a missing barrier as a changed result.
//
// What it cannot check: timing and occupancy, the memory model beyond
// barriers, and the device math library (expf here is the host's, so
// emulated results are close to, not identical with, a GPU's).
//
// Thread-safety: a launch belongs to the host thread that makes it.
//
//   KVFLEET_LAUNCH(kernel, grid, block, shared_bytes, stream, params);
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

struct CUstream_st {};

namespace kvfleet::cuda_emu {

struct Dim3 {
  constexpr Dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
  unsigned int x, y, z;
};

struct ThreadState {
  Dim3 thread_idx, block_idx, block_dim, grid_dim;
};

const ThreadState& Current();
void SyncThreads();
void SyncWarp();
// Exchanges 32-bit words within the calling thread's warp: every lane
// offers `value` and receives lane `source`'s.
uint32_t ShuffleWord(uint32_t value, int source);
int LaneId();
// cuda::GroupSum / GroupMax (cuda_compat.h) in one step: every lane offers
// its value, and at one barrier the butterfly of xor exchanges the device
// runs is computed for the whole warp, in the same order with the same
// roundings, so every lane gets the bits it would get on a GPU (for the
// same inputs) at a fraction of the emulated shuffles' cost.
float ButterflySum(float value, int lanes);
float ButterflyMax(float value, int lanes);

// Runs `kernel` once per thread of every block of the grid. Aborts, saying
// why, on a block that is not a whole number of warps, on dynamic shared
// memory (no kernel here uses it) or on a deadlocked barrier.
void Launch(Dim3 grid, Dim3 block, size_t shared_bytes, const std::function<void()>& kernel);

// Fibers of a block run last-to-first instead of first-to-last (for tests).
void SetReverseOrder(bool reverse);

template <typename T>
T ShuffleAny(T value, int source) {
  static_assert(sizeof(T) == 4, "the emulated shuffles move 32-bit values");
  uint32_t word;
  std::memcpy(&word, &value, 4);
  word = ShuffleWord(word, source);
  T out;
  std::memcpy(&out, &word, 4);
  return out;
}

}  // namespace kvfleet::cuda_emu

using dim3 = kvfleet::cuda_emu::Dim3;

#define threadIdx (::kvfleet::cuda_emu::Current().thread_idx)
#define blockIdx (::kvfleet::cuda_emu::Current().block_idx)
#define blockDim (::kvfleet::cuda_emu::Current().block_dim)
#define gridDim (::kvfleet::cuda_emu::Current().grid_dim)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

inline void __syncthreads() { ::kvfleet::cuda_emu::SyncThreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { ::kvfleet::cuda_emu::SyncWarp(); }
template <typename T>
T __shfl_xor_sync(unsigned, T value, int lane_mask, int = 32) {
  return ::kvfleet::cuda_emu::ShuffleAny(value, ::kvfleet::cuda_emu::LaneId() ^ lane_mask);
}
template <typename T>
T __shfl_sync(unsigned, T value, int source, int = 32) {
  return ::kvfleet::cuda_emu::ShuffleAny(value, source);
}

template <typename T>
inline T __ldg(const T* p) {
  return *p;
}

// IEEE round-to-nearest arithmetic that the compiler never contracts.
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }

struct alignas(16) uint4 {
  unsigned int x, y, z, w;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned int x, y;
};

#define KVFLEET_EMULATED_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                     \
  ::kvfleet::cuda_emu::Launch((grid), (block), (shared_bytes), [&] { kernel(__VA_ARGS__); })
