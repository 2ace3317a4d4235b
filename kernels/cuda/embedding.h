// Token embedding on the GPU: the rows of an embedding table for a batch's
// token ids, dequantized to float32 exactly as kernels/cpu's EmbedRows does.
//
// Shapes (device memory): table [slice.rows, cols] stored as `type`, the
// vocabulary's rows of `slice` (a token outside it embeds as zeros); ids
// [count]; out [count, cols]. ids must be inside the vocabulary (validated
// on the host).
//
//   LaunchEmbedRows(DType::kQ8_0, table, 576, {.rows = vocab}, ids, tokens, x, stream);
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/common/vocab_slice.h"
#include "kernels/cuda/stream.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

void LaunchEmbedRows(DType type, const void* table, int64_t cols, VocabSlice slice, const int32_t* ids, int64_t count,
                     float* out, ::kvfleet::cuda::Stream stream);

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
