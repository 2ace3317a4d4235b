// Row-wise and element-wise CPU kernels of the forward pass. Each row is
// computed by a fixed sequence of operations independent of how many rows are
// processed together (docs/design.md, Exactness).
//
// Shapes are row-major; `rows` rows of `n` floats.
//
//   RmsNorm(x, weight, y, rows, n, 1e-5f);
//   SwiGlu(gate, up, out, rows * ffn);
#pragma once

#include <cstdint>

namespace kvfleet::kernels {

// y[r] = x[r] / sqrt(mean(x[r]²) + eps) · weight. n a multiple of 8. y may alias x.
void RmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t n, float eps);

// RmsNorm in two halves, for rows split across tensor-parallel ranks (each
// holds n of a row's `total` values; the sums are added across the ranks
// in between): sums[r] = Σ x[r]², then y[r] = x[r] / sqrt(sums[r] / total
// + eps) · weight. With the sums of whole rows and total = n, the two give
// RmsNorm's values bit for bit.
void SumSquares(const float* x, int64_t rows, int64_t n, float* sums);
void ScaleByRms(const float* x, const float* sums, const float* weight, float* y, int64_t rows, int64_t n, float total,
                float eps);

// out[i] = silu(gate[i]) · up[i], silu(v) = v / (1 + e^−v). out may alias gate.
void SwiGlu(const float* gate, const float* up, float* out, int64_t count);

// out[i] = silu(x[i]) (the draft heads' residual blocks). out may alias x.
void Silu(const float* x, float* out, int64_t count);

// out[i] = gelu_tanh(gate[i]) · up[i], gelu_tanh(v) = v/2 · (1 + tanh(√(2/π) · (v + 0.044715 v³)))
// (Gemma's activation). out may alias gate.
void GeluTanhMul(const float* gate, const float* up, float* out, int64_t count);

// x[i] *= s.
void Scale(float* x, int64_t count, float s);

// y[i] += x[i].
void AddInPlace(float* y, const float* x, int64_t count);

// y[r] += bias, for `rows` rows of n.
void AddBias(float* y, const float* bias, int64_t rows, int64_t n);

// out[i] = x[rows[i]], rows of n floats (the rows that want logits).
void GatherRows(const float* x, const int32_t* rows, int64_t count, int64_t n, float* out);

}  // namespace kvfleet::kernels
