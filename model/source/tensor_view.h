// A named tensor of a model file, whatever the format: its element type,
// its shape and its bytes in the file's mapping (never copied).
//
// Shapes are row-major, slowest dimension first, as numpy and safetensors
// write them: a weight matrix is [rows, cols] with one output feature per
// row. The GGUF reader turns its fastest-first shapes around to match.
//
//   const TensorView* t = source.FindTensor("blk.0.attn_q.weight");
//   int64_t rows = t->shape[0], cols = t->shape[1];
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/float16.h"

namespace kvfleet::model {

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  int64_t num_elements = 0;
  int64_t num_bytes = 0;
};

// Element i of a float32, float16 or bfloat16 tensor (vector weights are
// widened to float32 through this).
inline float FloatElement(const TensorView& t, int64_t i) {
  if (t.dtype == DType::kF32) {
    float f;
    std::memcpy(&f, t.data + 4 * i, sizeof(f));
    return f;
  }
  uint16_t bits;
  std::memcpy(&bits, t.data + 2 * i, sizeof(bits));
  return t.dtype == DType::kF16 ? HalfToFloat(bits) : Bf16ToFloat(bits);
}

}  // namespace kvfleet::model
