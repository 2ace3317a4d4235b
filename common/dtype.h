// Element types of tensors (weights, activations, KV) and the geometry of
// their quantization blocks. Shared by the model readers and the kernels.
//
//   int64_t bytes = RowBytes(DType::kQ4_1, 576);  // 18 blocks × 20 bytes
#pragma once

#include <cstdint>


namespace kvfleet {

enum class DType : int32_t {
  kF32,
  kF16,
  kBF16,
  kQ8_0,  // blocks of 32: f16 scale, 32 × int8
  kQ4_0,  // blocks of 32: f16 scale, 16 bytes of nibbles, value = (q - 8) · d
  kQ4_1,  // blocks of 32: f16 scale, f16 min, 16 bytes of nibbles, value = q · d + m
  kQ5_0,  // blocks of 32: f16 scale, 32 high bits, 16 bytes of nibbles, value = (q − 16) · d
  kQ5_1,  // blocks of 32: f16 scale, f16 min, 32 high bits, 16 bytes of nibbles, value = q · d + m
  kQ2_K,  // super-blocks of 256: 16 bytes of 4-bit scale and min pairs (one per 16 values), 64 bytes
          // of 2-bit values, f16 d and dmin; value = (d · scale) · q − (dmin · min)
  kQ3_K,  // super-blocks of 256: 32 bytes of high bits, 64 of low 2-bit values, 12 bytes of 6-bit
          // scales (one per 16 values), f16 d; value = (d · (scale − 32)) · (q − 4)
  kQ4_K,  // super-blocks of 256: f16 d and dmin, 12 bytes of 6-bit scales and mins for 8 sub-blocks
          // of 32, 128 bytes of nibbles; value = (d · scale) · q − (dmin · min)
  kQ5_K,  // super-blocks of 256: as Q4_K, with 32 bytes of fifth bits before the nibbles
  kQ6_K,  // super-blocks of 256: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 int8 scales
          // (one per 16 values), f16 d; value = (d · scale) · (q − 32)
};

struct DTypeTraits {
  const char* name;
  int64_t block_elems;  // elements per block (1 for plain floats)
  int64_t block_bytes;  // bytes per block
};

constexpr DTypeTraits Traits(DType t) {
  switch (t) {
    case DType::kF32: return {"F32", 1, 4};
    case DType::kF16: return {"F16", 1, 2};
    case DType::kBF16: return {"BF16", 1, 2};
    case DType::kQ8_0: return {"Q8_0", 32, 34};
    case DType::kQ4_0: return {"Q4_0", 32, 18};
    case DType::kQ4_1: return {"Q4_1", 32, 20};
    case DType::kQ5_0: return {"Q5_0", 32, 22};
    case DType::kQ5_1: return {"Q5_1", 32, 24};
    case DType::kQ2_K: return {"Q2_K", 256, 84};
    case DType::kQ3_K: return {"Q3_K", 256, 110};
    case DType::kQ4_K: return {"Q4_K", 256, 144};
    case DType::kQ5_K: return {"Q5_K", 256, 176};
    case DType::kQ6_K: return {"Q6_K", 256, 210};
  }
  return {"?", 1, 0};
}

constexpr const char* DTypeName(DType t) { return Traits(t).name; }

// Bytes of one row of `elems` elements; elems must be a multiple of the block.
constexpr int64_t RowBytes(DType t, int64_t elems) {
  const DTypeTraits tr = Traits(t);
  return elems / tr.block_elems * tr.block_bytes;
}

constexpr DType kAllDTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                                DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K,
                                DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

// The types whose blocks span 256 values (a row must be a multiple of it).
constexpr bool IsKQuant(DType t) { return Traits(t).block_elems == 256; }

// n rounded up to whole blocks of t (and of 32, what every kernel walks by).
constexpr int64_t RoundUpToBlock(DType t, int64_t n) {
  const int64_t b = Traits(t).block_elems > 32 ? Traits(t).block_elems : 32;
  return (n + b - 1) / b * b;
}

}  // namespace kvfleet
