#include "model/arch/tensor_binder.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace kvfleet::model {

absl::StatusOr<const TensorView*> TensorBinder::Find(const std::string& name) const {
  const TensorView* t = source_.FindTensor(name);
  if (t == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(source_.path(), ": tensor '", name, "' is missing"));
  }
  return t;
}

absl::Status TensorBinder::WrongShape(const TensorView& t, const std::string& expected) const {
  return absl::InvalidArgumentError(absl::StrCat(source_.path(), ": tensor '", t.name, "' has shape [",
                                                 absl::StrJoin(t.shape, ", "), "] (rows first), expected ", expected));
}

absl::StatusOr<WeightView> TensorBinder::Matrix(const std::string& name, int64_t rows, int64_t cols) {
  ASSIGN_OR_RETURN(const TensorView* t, Find(name));
  if (t->shape.size() != 2 || t->shape[0] != rows || t->shape[1] != cols) {
    return WrongShape(*t, absl::StrCat("[", rows, ", ", cols, "]"));
  }
  // The kernels walk a row 32 values at a time (and a K-quant's 256).
  const int64_t block = std::max<int64_t>(32, Traits(t->dtype).block_elems);
  if (cols % block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(source_.path(), ": tensor '", name, "': row length ", cols,
                                                   " is not a multiple of ", block, " (", DTypeName(t->dtype),
                                                   ")"));
  }
  return WeightView{name, t->dtype, rows, cols, t->data};
}

absl::StatusOr<WeightView> TensorBinder::Vector(const std::string& name, int64_t n, float offset) {
  ASSIGN_OR_RETURN(const TensorView* t, Find(name));
  if (t->shape.size() != 1 || t->shape[0] != n) return WrongShape(*t, absl::StrCat("[", n, "]"));
  if (t->dtype == DType::kF32 && offset == 0.0f) return WeightView{name, t->dtype, 1, n, t->data};
  if (t->dtype != DType::kF32 && t->dtype != DType::kF16 && t->dtype != DType::kBF16) {
    return absl::InvalidArgumentError(absl::StrCat(source_.path(), ": tensor '", name, "' has type ",
                                                   DTypeName(t->dtype),
                                                   "; norm weights and biases must be F32, F16 or BF16"));
  }
  auto copy = std::make_unique<float[]>(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) copy[i] = FloatElement(*t, i) + offset;
  storage_.push_back(std::move(copy));
  return WeightView{name, DType::kF32, 1, n, storage_.back().get()};
}

}  // namespace kvfleet::model
