#include "kernels/cpu/embedding.h"

#include "kernels/cpu/quantize.h"

namespace kvfleet::kernels {

void EmbedRows(DType type, const void* table, int64_t cols, const int32_t* ids, int64_t count, float* out) {
  const int64_t row_bytes = RowBytes(type, cols);
  for (int64_t t = 0; t < count; ++t) {
    DequantizeRow(type, static_cast<const uint8_t*>(table) + ids[t] * row_bytes, out + t * cols, cols);
  }
}

}  // namespace kvfleet::kernels
