// Quantized weights repacked once, at load, for the integer-dot matmul
// (matmul_q8.h): panels of 8 consecutive rows whose blocks of 32 values are
// interleaved, so that one 32-byte register carries 4 values of each of the
// 8 rows and its 8 lanes are 8 output features.
//
// Every format is repacked exactly: each value keeps its bits and each scale
// its bits, so the panel's weights are the file's weights. A value is stored
// unsigned (u), with the format's zero point or min applied in the float
// part (Q8_0 keeps its signed bytes). Panel p holds rows 8p .. 8p+7 (rows
// past n are zeros, never stored to y) as k / 32 panel blocks; a K-quant's
// 8 blocks of a super-block follow a header of the 8 rows' f16 d (and
// dmin). A panel block, in order:
//   low plane   "u-register" q (q = 0..7) holds, in byte 4r + i, the low
//               bits of element 4q + i of row r:
//                 8 bits (Q8_0):  register q itself (256 bytes);
//                 4 bits:         register q / 2, low nibble for q even,
//                                 high nibble for q odd (128 bytes);
//                 2 bits (Q2_K, Q3_K): register q / 4, bits 2(q % 4) (64 bytes);
//   high plane  1 bit (Q5_0, Q5_1, Q5_K, Q3_K): bit q of byte 4r + i of one
//               register (32 bytes); 2 bits (Q6_K): register q / 4, bits
//               2(q % 4) (64 bytes); shifted above the low bits;
//   scales      Q8_0, Q4_0, Q5_0: d[8] (f16); Q4_1, Q5_1: d[8], m[8] (f16);
//               Q4_K, Q5_K: the 6-bit scale[8] and min[8], one byte each;
//               Q3_K, Q6_K: the signed scale[2][8] of each 16-value half
//               (Q3_K's less its 32); Q2_K: scale | min << 4 [2][8].
// The legacy formats take exactly the bytes of their row layout (n a
// multiple of 8); the K-quants a little more (Q3_K 114 bytes per 256
// values for the file's 110, Q4_K 148 for 144, Q5_K 180 for 176; Q2_K and
// Q6_K the same), and the executor's memory count uses Q8PanelBytes.
//
//   std::vector<uint8_t> panels(Q8PanelBytes(DType::kQ4_K, n, k));
//   PackQ8Panels(DType::kQ4_K, rows, n, k, panels.data());
//   MatMulQ8({DType::kQ4_K, n, k, panels.data()}, x, m, y, pool);
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "kernels/cpu/formats/format_common.h"

namespace kvfleet::kernels {

inline constexpr int64_t kQ8PanelRows = 8;

// A format's panel layout (CpuFormat<T>::kPanels, kernels/cpu/formats/);
// low_bits 0 for a type with none (F32, F16, BF16).
Q8PanelLayout PanelLayout(DType t);

struct Q8PanelWeights {
  DType type = DType::kQ4_1;  // a type with a PanelLayout
  int64_t n = 0;              // rows (output features)
  int64_t k = 0;              // columns, a multiple of 32 (256 for the K-quants)
  const uint8_t* data = nullptr;
};

// Bytes of the whole packed matrix.
int64_t Q8PanelBytes(DType type, int64_t n, int64_t k);

// rows: n rows of k in GGUF's row layout; out: Q8PanelBytes(type, n, k).
void PackQ8Panels(DType type, const void* rows, int64_t n, int64_t k, uint8_t* out);

// Block b (32 values) of a row in GGUF's layout, unpacked: what the panels
// hold of it (CpuFormat<T>::Unpack).
Q8SourceBlock UnpackQ8SourceBlock(DType type, const uint8_t* row, int64_t b);

}  // namespace kvfleet::kernels
