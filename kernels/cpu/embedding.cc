#include "kernels/cpu/embedding.h"

#include <algorithm>

#include "kernels/cpu/quantize.h"

namespace kvfleet::kernels {

void EmbedRows(DType type, const void* table, int64_t cols, VocabSlice slice, const int32_t* ids, int64_t count,
               float* out) {
  const int64_t row_bytes = RowBytes(type, cols);
  for (int64_t t = 0; t < count; ++t) {
    if (!slice.Holds(ids[t])) {
      std::fill_n(out + t * cols, cols, 0.0f);
      continue;
    }
    const int64_t row = ids[t] - slice.first_row;
    DequantizeRow(type, static_cast<const uint8_t*>(table) + row * row_bytes, out + t * cols, cols);
  }
}

}  // namespace kvfleet::kernels
