// y = x · Wᵀ for a weight matrix W stored in any supported type.
//
// Shapes (row-major):
//   w: [n, k] in w_type   (GGUF's [ne0 = k, ne1 = n]; one output feature per row)
//   x: [m, k] float32     (one token per row)
//   y: [m, n] float32
//
// Exactness: y[i][j] is computed by one fixed sequence of operations that
// depends only on row j of W and row i of x — never on m, on how rows are
// tiled, or on the thread count. So a token's result is identical whether it
// is computed alone or in a batch (docs/design.md, Exactness).
//
// Weights stay in their storage type. Up to 10 x rows, each weight block is
// dequantized into registers and used by every row; past that, each thread
// dequantizes 4 (AVX2) or 8 (AVX-512) rows at a time into a small scratch
// buffer and multiplies every x row against them.
//
//   MatMulParams p{.w_type = DType::kQ4_1, .w = data, .n = 1536, .k = 576, .x = x, .m = 7, .y = y};
//   MatMul(p, pool);
#pragma once

#include <cstdint>
#include <string_view>

#include "common/dtype.h"
#include "common/thread_pool.h"

namespace kvfleet::kernels {

struct MatMulParams {
  DType w_type = DType::kF32;
  const void* w = nullptr;  // [n, k]
  int64_t n = 0;
  int64_t k = 0;             // multiple of 32
  const float* x = nullptr;  // [m, k]
  int64_t m = 0;
  float* y = nullptr;  // [m, n]
};

void MatMul(const MatMulParams& p, ThreadPool& pool);

// The instruction set of the many-token kernel (more than 10 x rows): AVX2,
// or AVX-512 where CPUID finds F, DQ and VL, two rows' 8-lane chains per
// register. Both give the same bits; chosen at first use, and forced by
// tests and benchmarks (false where this CPU cannot run it).
enum class FloatDotIsa { kAvx2, kAvx512 };
FloatDotIsa ActiveFloatDotIsa();
bool ForceFloatDotIsa(FloatDotIsa isa);
std::string_view FloatDotIsaName(FloatDotIsa isa);

// Sizes the calling thread's dequantization scratch for inner dimensions up
// to max_k, so no later MatMul on it allocates (run it on each pool thread).
void ReserveMatMulScratch(int64_t max_k);

// The per-element reference: y = Σ_k dequant(w)[k] · x[k] in the same order
// as MatMul. Tests compare MatMul against it bit for bit.
float DotReference(const float* w_dequantized, const float* x, int64_t k);

}  // namespace kvfleet::kernels
