#include "kernels/cuda/matmul.h"

#include "kernels/cuda/dequant.cuh"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {
namespace {

constexpr int kWarpsPerBlock = 4;

// One warp per output feature j, R rows of x at a time: the weight chunk is
// dequantized once into registers and applied to every row.
template <DType T, int R>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) MatMulKernel(MatMulParams p) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + static_cast<int64_t>(threadIdx.x) / 32;
  if (j >= p.n) return;  // the whole warp leaves together; no barrier follows
  const int64_t first_row = static_cast<int64_t>(blockIdx.y) * R;
  const int rows = static_cast<int>(p.m - first_row < R ? p.m - first_row : R);
  constexpr int kE = WeightChunk<T>::kElements;
  const int64_t chunks = p.k / kE;
  const uint8_t* w_row = static_cast<const uint8_t*>(p.w) + j * RowBytes(T, p.k);
  float acc[R];
  KVFLEET_UNROLL
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int64_t c = lane; c < chunks; c += 32) {
    float w[kE];
    LoadWeightChunk<T>(w_row, c, w);
    KVFLEET_UNROLL
    for (int r = 0; r < R; ++r) {
      if (r < rows) {
        const float* x = p.x + (first_row + r) * p.k + c * kE;
        KVFLEET_UNROLL
        for (int e = 0; e < kE; e += 4) {
          const float4 xv = __ldg(reinterpret_cast<const float4*>(x + e));
          acc[r] = __fmaf_rn(w[e], xv.x, acc[r]);
          acc[r] = __fmaf_rn(w[e + 1], xv.y, acc[r]);
          acc[r] = __fmaf_rn(w[e + 2], xv.z, acc[r]);
          acc[r] = __fmaf_rn(w[e + 3], xv.w, acc[r]);
        }
      }
    }
  }
  KVFLEET_UNROLL
  for (int r = 0; r < R; ++r) {
    const float sum = ::kvfleet::cuda::GroupSum(acc[r], 32);
    if (lane == 0 && r < rows) p.y[(first_row + r) * p.n + j] = sum;
  }
}

template <DType T, int R>
void Launch(const MatMulParams& p, ::kvfleet::cuda::Stream stream) {
  const dim3 grid(static_cast<unsigned>((p.n + kWarpsPerBlock - 1) / kWarpsPerBlock),
                  static_cast<unsigned>((p.m + R - 1) / R));
  auto* kernel = &MatMulKernel<T, R>;
  KVFLEET_LAUNCH(kernel, grid, dim3(kWarpsPerBlock * 32), 0, stream, p);
}

template <DType T>
void LaunchTyped(const MatMulParams& p, ::kvfleet::cuda::Stream stream) {
  // Which R runs changes nothing in a row's result, only how often the
  // weights are read: a decode step reads them once, a prefill every R rows.
  if (p.m == 1) return Launch<T, 1>(p, stream);
  if (p.m == 2) return Launch<T, 2>(p, stream);
  if (p.m <= 4) return Launch<T, 4>(p, stream);
  if (p.m <= 8) return Launch<T, 8>(p, stream);
  return Launch<T, 16>(p, stream);
}

}  // namespace

void LaunchMatMul(const MatMulParams& p, ::kvfleet::cuda::Stream stream) {
  if (p.m == 0 || p.n == 0) return;
  DispatchDType(p.w_type, [&](auto t) { LaunchTyped<decltype(t)::value>(p, stream); });
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
