// The float path's AVX-512 kernel for many tokens (matmul.cc calls it
// where CPUID finds AVX-512 F, DQ and VL). Bit-identical to the AVX2
// kernels: each (token, row) is DotOne's 8-lane chain and HorizontalSum.
#pragma once

#include <cstdint>

namespace kvfleet::kernels {

// The tile's layout: rows in pairs, each pair's region holding the next 8
// values of its two rows side by side, so one 64-byte load is the register
// the kernel multiplies (no insert). Row r's values [8c, 8c + 8) lie at
// EightRowTileOffset(r, k) + c · kEightRowTileChunkStride.
inline constexpr int64_t kEightRowTileChunkStride = 16;
constexpr int64_t EightRowTileOffset(int64_t r, int64_t k) { return r / 2 * 2 * k + r % 2 * 8; }

// y[t · y_stride + r] = Σ w_r[i] · x[t · k + i] for the eight dequantized
// rows w_r of the tile (in the layout above) and the m tokens of x.
void DotEightRowsAvx512(const float* tile, const float* x, int64_t k, int64_t m, float* y, int64_t y_stride);

// machine_ceilings.cc: `iterations` rounds of 10 independent 512-bit FMA
// chains (16 lanes each), the float path's widest instruction.
double Avx512FmaLoop(int64_t iterations);

}  // namespace kvfleet::kernels
