// A run of a step's rows that one LoRA adapter changes at one projection,
// as every backend's AddLora kernel reads it: rows [first_row, first_row +
// rows) of x and y, and the adapter's pair for that projection in the
// backend's memory. A segment whose pair is null (the adapter leaves the
// projection alone) adds nothing.
//
// The kernels add, row by row, y += scale · B·(A·x): the rank-long product
// h = A·x first, then each output's dot with h. A row's arithmetic never
// depends on which other rows or segments share the step.
#pragma once

#include <cstdint>

namespace kvfleet::kernels {

// The largest rank the kernels take (a row's h lives in registers or on the stack).
inline constexpr int32_t kMaxLoraRank = 512;

struct LoraSegment {
  int32_t first_row = 0;
  int32_t rows = 0;
  int32_t rank = 0;
  float scale = 0.0f;
  const float* a = nullptr;  // [rank, in], row-major
  const float* b = nullptr;  // [out, rank], row-major
};

}  // namespace kvfleet::kernels
