// The blocks of one weight row, read in order 0, 1, 2, … as 32 values in
// four AVX2 registers: each format's Reader (kernels/cpu/formats/), the
// single definition of its values. The row dequantizer and the fused
// matmul both read rows through RowBlocks, so the two paths see
// bit-identical weights. A K-quant's block b is sub-block b % 8 of
// super-block b / 8, whose scales are decoded once.
//
//   RowBlocks<DType::kQ4_K> blocks(row);
//   for (int64_t b = 0; b < k / 32; ++b) Block32 v = blocks.Next(b);
#pragma once

#include "common/dtype.h"
#include "kernels/cpu/formats/all_formats.h"

namespace kvfleet::kernels {

template <DType T>
using RowBlocks = typename CpuFormat<T>::Reader;

}  // namespace kvfleet::kernels
