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
  }
  return {"?", 1, 0};
}

constexpr const char* DTypeName(DType t) { return Traits(t).name; }

// Bytes of one row of `elems` elements; elems must be a multiple of the block.
constexpr int64_t RowBytes(DType t, int64_t elems) {
  const DTypeTraits tr = Traits(t);
  return elems / tr.block_elems * tr.block_bytes;
}

constexpr DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1};

}  // namespace kvfleet
