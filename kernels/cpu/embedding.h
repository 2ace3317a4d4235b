// Token embedding: the rows of an embedding table for a batch's token ids,
// dequantized to float32 (the table stays in its storage type).
//
// Shapes: table [slice.rows, cols] stored as `type`, holding the
// vocabulary's rows of `slice` (vocab_slice.h: a token outside it embeds as
// zeros); ids [count]; out [count, cols].
//
//   EmbedRows(DType::kQ8_0, table, 576, {.rows = vocab}, ids, tokens, x);
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/common/vocab_slice.h"

namespace kvfleet::kernels {

// ids must be inside the vocabulary (the executor validates them first).
void EmbedRows(DType type, const void* table, int64_t cols, VocabSlice slice, const int32_t* ids, int64_t count,
               float* out);

}  // namespace kvfleet::kernels
