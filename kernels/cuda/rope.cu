#include "kernels/cuda/rope.h"

#include "kernels/cuda/cuda_compat.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {
namespace {

constexpr int kThreads = 256;

// One thread per rotated pair: (token, head, i).
__global__ void RopeKernel(bool adjacent, int64_t head_dim, int64_t half, const float* cos_table,
                           const float* sin_table, const int32_t* positions, float* x, int64_t heads, int64_t pairs) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (idx >= pairs) return;
  const int64_t i = idx % half, th = idx / half;
  const int64_t t = th / heads;
  const float c = cos_table[static_cast<int64_t>(positions[t]) * half + i];
  const float s = sin_table[static_cast<int64_t>(positions[t]) * half + i];
  float* v = x + th * head_dim;
  const int64_t a = adjacent ? 2 * i : i, b = adjacent ? 2 * i + 1 : i + half;
  const float x0 = v[a], x1 = v[b];
  // The CPU's order: (x0·c) − (x1·s) and (x0·s) + (x1·c), each product rounded.
  v[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  v[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

}  // namespace

void LaunchRope(const RopeParams& p, const float* cos_table, const float* sin_table, const int32_t* positions,
                float* x, int64_t tokens, int64_t heads, ::kvfleet::cuda::Stream stream) {
  const int64_t half = p.rot_dim / 2, pairs = tokens * heads * half;
  if (pairs == 0) return;
  auto* kernel = &RopeKernel;
  KVFLEET_LAUNCH(kernel, dim3(static_cast<unsigned>((pairs + kThreads - 1) / kThreads)), dim3(kThreads), 0, stream,
                 p.mode == RopeMode::kAdjacent, p.head_dim, half, cos_table, sin_table, positions, x, heads, pairs);
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
