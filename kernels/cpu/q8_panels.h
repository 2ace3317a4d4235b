// Quantized weights repacked once, at load, for the integer-dot matmul
// (matmul_q8.h): panels of 8 consecutive rows whose blocks are interleaved,
// so that one 32-byte load carries 4 weights of each of the 8 rows and the
// 8 lanes of a register are 8 output features.
//
// Panel p holds rows 8p .. 8p+7 (rows past n are zeros, never stored to y),
// as k / 32 panel blocks, each:
//   Q4_0, Q4_1: 4 × 32 bytes of nibbles, then d[8] (f16), then (Q4_1) m[8]
//               (f16). In the 32 bytes of chunk c, byte 4r + i holds
//               element 8c + i of row r in its low nibble and element
//               8c + 4 + i in its high one.
//   Q8_0:       8 × 32 signed bytes, then d[8] (f16); in the 32 bytes of
//               group g, byte 4r + i is element 4g + i of row r.
// For n a multiple of 8 that is exactly the bytes of the row layout, so the
// memory planner's count holds for the packed copy (tests check it).
//
//   std::vector<uint8_t> panels(Q8PanelBytes(DType::kQ4_1, n, k));
//   PackQ8Panels(DType::kQ4_1, rows, n, k, panels.data());
//   MatMulQ8({DType::kQ4_1, n, k, panels.data()}, x, m, y, pool);
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace kvfleet::kernels {

inline constexpr int64_t kQ8PanelRows = 8;

struct Q8PanelWeights {
  DType type = DType::kQ4_1;  // Q8_0, Q4_0 or Q4_1
  int64_t n = 0;              // rows (output features)
  int64_t k = 0;              // columns, a multiple of 32
  const uint8_t* data = nullptr;
};

// Bytes of one panel block, and of the whole packed matrix.
int64_t Q8PanelBlockBytes(DType type);
int64_t Q8PanelBytes(DType type, int64_t n, int64_t k);

// rows: n rows of k in GGUF's row layout; out: Q8PanelBytes(type, n, k).
void PackQ8Panels(DType type, const void* rows, int64_t n, int64_t k, uint8_t* out);

}  // namespace kvfleet::kernels
