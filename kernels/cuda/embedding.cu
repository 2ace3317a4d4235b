#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/embedding.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {
namespace {

// One block per token; each thread dequantizes whole chunks of the row.
template <DType T>
__global__ void EmbedKernel(const uint8_t* table, int64_t cols, int64_t first_row, int64_t rows, const int32_t* ids,
                            float* out) {
  constexpr int kE = WeightChunk<T>::kElements;
  const int64_t t = blockIdx.x;
  const int64_t id = ids[t];
  if (id < first_row || id >= first_row + rows) {
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[t * cols + c] = 0.0f;
    return;
  }
  const uint8_t* row = table + (id - first_row) * RowBytes(T, cols);
  for (int64_t c = threadIdx.x; c < cols / kE; c += blockDim.x) {
    float v[kE];
    LoadWeightChunk<T>(row, c, v);
    KVFLEET_UNROLL
    for (int e = 0; e < kE; ++e) out[t * cols + c * kE + e] = v[e];
  }
}

template <DType T>
void Launch(const void* table, int64_t cols, VocabSlice slice, const int32_t* ids, int64_t count, float* out,
            ::kvfleet::cuda::Stream stream) {
  auto* kernel = &EmbedKernel<T>;
  KVFLEET_LAUNCH(kernel, dim3(static_cast<unsigned>(count)), dim3(128), 0, stream, static_cast<const uint8_t*>(table),
                 cols, slice.first_row, slice.rows, ids, out);
}

}  // namespace

void LaunchEmbedRows(DType type, const void* table, int64_t cols, VocabSlice slice, const int32_t* ids, int64_t count,
                     float* out, ::kvfleet::cuda::Stream stream) {
  if (count == 0) return;
  DispatchDType(type, [&](auto t) { Launch<decltype(t)::value>(table, cols, slice, ids, count, out, stream); });
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
