// Binds a source's named tensors to weight roles (decoder_weights.h),
// checking each one's shape against the config and its type against what
// that role can take. Architectures call it with their own tensor names.
//
// Vectors (norm weights, biases) are float32 for the kernels: a float32
// tensor is used in place, a float16 or bfloat16 one (as Hugging Face
// checkpoints store them) is converted once into storage the binder's
// caller keeps; `offset` adds a constant on the way (Gemma's checkpoints
// store a norm weight w that multiplies by 1 + w).
//
//   TensorBinder b(source, storage);
//   ASSIGN_OR_RETURN(l.attn_q, b.Matrix("blk.0.attn_q.weight", q_dim, hidden));
//   ASSIGN_OR_RETURN(l.attn_norm, b.Vector("blk.0.attn_norm.weight", hidden));
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/arch/decoder_weights.h"
#include "model/source/model_source.h"

namespace kvfleet::model {

// Float32 copies a binder made; they live as long as the weights that point into them.
using WeightStorage = std::vector<std::unique_ptr<float[]>>;

class TensorBinder {
 public:
  TensorBinder(const ModelSource& source, WeightStorage& storage) : source_(source), storage_(storage) {}

  // A 2-D weight [rows, cols] whose rows are a whole number of its type's blocks.
  absl::StatusOr<WeightView> Matrix(const std::string& name, int64_t rows, int64_t cols);
  // A float vector of n values, converted to float32 when stored narrower.
  absl::StatusOr<WeightView> Vector(const std::string& name, int64_t n, float offset = 0.0f);

  bool Has(const std::string& name) const { return source_.FindTensor(name) != nullptr; }
  const ModelSource& source() const { return source_; }

 private:
  absl::StatusOr<const TensorView*> Find(const std::string& name) const;
  absl::Status WrongShape(const TensorView& t, const std::string& expected) const;

  const ModelSource& source_;
  WeightStorage& storage_;
};

}  // namespace kvfleet::model
