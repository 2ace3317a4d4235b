// The float path's AVX-512 kernel for many tokens (matmul.cc calls it
// where CPUID finds AVX-512 F, DQ and VL). Bit-identical to the AVX2
// kernels: each (token, row) is DotOne's 8-lane chain and HorizontalSum.
#pragma once

#include <cstdint>

namespace kvfleet::kernels {

// y[t · y_stride + r] = Σ w[r · k + i] · x[t · k + i] for the eight
// dequantized rows r of w and the m tokens of x.
void DotEightRowsAvx512(const float* w, const float* x, int64_t k, int64_t m, float* y, int64_t y_stride);

// machine_ceilings.cc: `iterations` rounds of 10 independent 512-bit FMA
// chains (16 lanes each), the float path's widest instruction.
double Avx512FmaLoop(int64_t iterations);

}  // namespace kvfleet::kernels
