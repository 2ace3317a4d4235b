// Conversion of rows between float32 and every supported storage type.
//
// DequantizeRow is the reference semantics that every matmul path (CPU SIMD,
// CUDA) reproduces exactly. QuantizeRow follows ggml's reference quantizers
// for the 32-value types, so files written by kvfleet's tools load
// anywhere; for the K-quants it writes valid blocks from plain min/max
// scales (for test models), not ggml's searched ones.
//
//   std::vector<uint8_t> q(RowBytes(DType::kQ4_1, n));
//   QuantizeRow(DType::kQ4_1, src, q.data(), n);
//   DequantizeRow(DType::kQ4_1, q.data(), dst, n);
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace kvfleet::kernels {

// n must be a multiple of the type's block size.
void DequantizeRow(DType type, const void* src, float* dst, int64_t n);

// The same values, each run of 8 at its own place: values [8c, 8c + 8) to
// dst + c · chunk_stride (8: DequantizeRow's layout). The float path's
// AVX-512 tile interleaves its rows this way (matmul_f32_avx512.h).
void DequantizeRowInChunks(DType type, const void* src, float* dst, int64_t n, int64_t chunk_stride);
void QuantizeRow(DType type, const float* src, void* dst, int64_t n);

}  // namespace kvfleet::kernels
