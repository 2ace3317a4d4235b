// The LoRA product of a step's rows on the CPU (kernels/common/lora_segment.h):
// for each segment and each of its rows r, y[r] += scale · B·(A·x[r]),
// in float32. Both dot products accumulate in 16 lanes in index order,
// then sum the lanes in order, so a row's result is the same alone or in
// any batch, on any thread.
//
//   AddLora(segments, x, /*in=*/896, y, /*out=*/128, pool);
#pragma once

#include <cstdint>
#include <span>

#include "common/thread_pool.h"
#include "kernels/common/lora_segment.h"

namespace kvfleet::kernels {

// x is [rows, in], y [rows, out]; every segment's rank is in [1, kMaxLoraRank].
void AddLora(std::span<const LoraSegment> segments, const float* x, int64_t in, float* y, int64_t out,
             ThreadPool& pool);

}  // namespace kvfleet::kernels
