#include "kernels/cuda/embedding.h"

#include "kernels/cuda/dequant.cuh"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {
namespace {

// One block per token; each thread dequantizes whole chunks of the row.
template <DType T>
__global__ void EmbedKernel(const uint8_t* table, int64_t cols, const int32_t* ids, float* out) {
  constexpr int kE = WeightChunk<T>::kElements;
  const int64_t t = blockIdx.x;
  const uint8_t* row = table + static_cast<int64_t>(ids[t]) * RowBytes(T, cols);
  for (int64_t c = threadIdx.x; c < cols / kE; c += blockDim.x) {
    float v[kE];
    LoadWeightChunk<T>(row, c, v);
    KVFLEET_UNROLL
    for (int e = 0; e < kE; ++e) out[t * cols + c * kE + e] = v[e];
  }
}

template <DType T>
void Launch(const void* table, int64_t cols, const int32_t* ids, int64_t count, float* out,
            ::kvfleet::cuda::Stream stream) {
  auto* kernel = &EmbedKernel<T>;
  KVFLEET_LAUNCH(kernel, dim3(static_cast<unsigned>(count)), dim3(128), 0, stream,
                 static_cast<const uint8_t*>(table), cols, ids, out);
}

}  // namespace

void LaunchEmbedRows(DType type, const void* table, int64_t cols, const int32_t* ids, int64_t count, float* out,
                     ::kvfleet::cuda::Stream stream) {
  if (count == 0) return;
  switch (type) {
    case DType::kF32: return Launch<DType::kF32>(table, cols, ids, count, out, stream);
    case DType::kF16: return Launch<DType::kF16>(table, cols, ids, count, out, stream);
    case DType::kBF16: return Launch<DType::kBF16>(table, cols, ids, count, out, stream);
    case DType::kQ8_0: return Launch<DType::kQ8_0>(table, cols, ids, count, out, stream);
    case DType::kQ4_0: return Launch<DType::kQ4_0>(table, cols, ids, count, out, stream);
    case DType::kQ4_1: return Launch<DType::kQ4_1>(table, cols, ids, count, out, stream);
    case DType::kQ5_0: return Launch<DType::kQ5_0>(table, cols, ids, count, out, stream);
    case DType::kQ5_1: return Launch<DType::kQ5_1>(table, cols, ids, count, out, stream);
    case DType::kQ2_K: return Launch<DType::kQ2_K>(table, cols, ids, count, out, stream);
    case DType::kQ3_K: return Launch<DType::kQ3_K>(table, cols, ids, count, out, stream);
    case DType::kQ4_K: return Launch<DType::kQ4_K>(table, cols, ids, count, out, stream);
    case DType::kQ5_K: return Launch<DType::kQ5_K>(table, cols, ids, count, out, stream);
    case DType::kQ6_K: return Launch<DType::kQ6_K>(table, cols, ids, count, out, stream);
  }
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
