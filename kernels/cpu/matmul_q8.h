// y = x · Wᵀ with the activations quantized to 8 bits (quantize_activations.h)
// and integer dot products, for every quantized weight type repacked into
// panels of 8 rows at load (q8_panels.h): per 32 weights of 8 rows, one
// integer multiply-add instruction per 4 of them, and the float work once
// per block for all 8 rows; far fewer instructions than dequantizing to
// float (matmul.h). Threads split the panels (output features), never k.
//
// The instruction set is chosen at run time from CPUID: AVX-512 VNNI where
// the CPU has it (512-bit vpdpbusd over two panels at once; for a K-quant
// from 8 tokens), else AVX2 (vpmaddubsw + vpmaddwd over one, whose order
// reads a K-quant's weights faster for a few tokens); both give identical bits
// (matmul_q8_kernel.h says why), so a stream may resume on a node with the
// other. Every result depends only on its token and its
// weight row: batch invariant, as MatMul.
//
//   MatMulQ8({DType::kQ4_1, n, k, panels}, x, m, y, pool);
#pragma once

#include <cstdint>
#include <string_view>

#include "common/dtype.h"
#include "common/thread_pool.h"
#include "kernels/cpu/q8_panels.h"
#include "kernels/cpu/quantize_activations.h"

namespace kvfleet::kernels {

enum class Q8DotIsa { kAvx2, kAvx512Vnni };

// Whether MatMulQ8 takes weights of this type.
bool Q8ActivationsApply(DType w_type);

// y [m, n] = x [m, k] · Wᵀ. `scratch` holds the quantized tokens: at least
// m · k / 32 blocks, owned by the caller so a warm step allocates nothing
// whatever thread calls (the CPU executor's); null: a vector of the calling
// thread's, grown as needed (tests, benchmarks).
void MatMulQ8(const Q8PanelWeights& w, const float* x, int64_t m, float* y, ThreadPool& pool,
              BlockQ8A* scratch = nullptr);

// The set in use (the best this CPU has unless forced); tests force each
// one the machine can run. Forcing one it cannot run is refused (false).
Q8DotIsa ActiveQ8DotIsa();
bool ForceQ8DotIsa(Q8DotIsa isa);
bool CpuHasQ8DotIsa(Q8DotIsa isa);
std::string_view Q8DotIsaName(Q8DotIsa isa);

// The scalar definition: y for one token and one weight row (GGUF's row
// layout), in the order matmul_q8_kernel.h documents. Tests compare
// MatMulQ8 with it bit for bit.
float DotQ8Reference(DType w_type, const void* w_row, const BlockQ8A* x, int64_t k);

}  // namespace kvfleet::kernels
