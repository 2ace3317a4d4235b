// The LoRA product of a step's rows on the GPU (kernels/common/lora_segment.h),
// with kernels/cpu/lora.h's semantics: for each segment and each of its
// rows r, y[r] += scale · B·(A·x[r]), in float32. One launch covers every
// segment of a site (Punica's segmented gather: each row reads its own
// adapter's pair).
//
// Exactness: one block per row. h = A·x by one warp per rank row (lane l
// takes x's elements l, l+32, ... in order, then the butterfly), then each
// output's dot with h by one thread over the rank in order. A row's result
// never depends on its batch.
//
//   LaunchAddLora(segments, count, rows, x, 896, y, 128, stream);
#pragma once

#include <cstdint>

#include "kernels/common/lora_segment.h"
#include "kernels/cuda/stream.h"

namespace kvfleet::kernels::cuda {
inline namespace KVFLEET_CUDA_BUILD {

// `segments` (device memory) holds `count` segments covering `rows` rows
// in all; x is [.., in], y [.., out], device memory.
void LaunchAddLora(const LoraSegment* segments, int32_t count, int64_t rows, const float* x, int64_t in, float* y,
                   int64_t out, ::kvfleet::cuda::Stream stream);

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::kernels::cuda
