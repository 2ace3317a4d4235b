// Token embedding: the rows of an embedding table for a batch's token ids,
// dequantized to float32 (the table stays in its storage type).
//
// Shapes: table [vocab, cols] stored as `type`; ids [count]; out [count, cols].
//
//   EmbedRows(DType::kQ8_0, table, 576, ids, tokens, x);
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace kvfleet::kernels {

// ids must be inside the table (the executor validates them first).
void EmbedRows(DType type, const void* table, int64_t cols, const int32_t* ids, int64_t count, float* out);

}  // namespace kvfleet::kernels
