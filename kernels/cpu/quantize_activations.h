// Activations quantized to 8 bits per 32-value block, for the integer-dot
// matmul (matmul_q8.h): per block a float scale d = max|x| / 127, the values
// q = round-to-nearest-even(x · (127 / max|x|)) in [-127, 127], their
// integer sum and the sums of each 16-value half (the formats with a zero
// point or a min per 16 values subtract them), and d · Σq (the offset term
// of the formats with a min per 32 values: computed once per token block,
// not once per weight row). A block with a NaN or an infinity gets
// d = NaN and q = 0.
//
// Exactness: a row's blocks depend only on that row, computed by one fixed
// sequence of float operations (the AVX2 path and the scalar reference give
// identical bits; tests check it), so a token quantizes the same alone or
// in a batch.
//
//   std::vector<BlockQ8A> q(k / 32);
//   QuantizeActivationRow(x, k, q.data());
#pragma once

#include <cstdint>

namespace kvfleet::kernels {

struct BlockQ8A {
  float d;           // scale: value ≈ qs[i] · d
  int32_t sum;       // Σ qs[i]
  float dsum;        // d · float(sum)
  int16_t sum16[2];  // Σ qs[i] over i < 16 and over i ≥ 16
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8A) == 48);

// x[0, k) into k / 32 blocks; k a multiple of 32.
void QuantizeActivationRow(const float* x, int64_t k, BlockQ8A* out);

// The scalar definition QuantizeActivationRow must match bit for bit.
void QuantizeActivationRowReference(const float* x, int64_t k, BlockQ8A* out);

}  // namespace kvfleet::kernels
