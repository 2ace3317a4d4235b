// A model's matmul weights repacked into the 8-bit activation kernels'
// panels (kernels/cpu/q8_panels.h), once, when a CPU executor runs with
// --cpu-activations q8: the seven matrices of every layer and the output
// head, where they are Q8_0, Q4_0 or Q4_1. As each tensor is packed, the
// mapped file's pages of it are dropped, so the weights are not held twice.
// The one packed tensor something else still reads in the row layout (the
// embedding table, when the output head shares it) comes back from the file
// page by page as tokens need its rows; reread_bytes() counts it.
//
//   ASSIGN_OR_RETURN(Q8PackedWeights packed, Q8PackedWeights::Pack(model, pool));
//   if (const kernels::Q8PanelWeights* w = packed.Find(view.data)) kernels::MatMulQ8(*w, x, m, y, pool);
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "common/thread_pool.h"
#include "kernels/cpu/q8_panels.h"
#include "model/model.h"

namespace kvfleet::engine {

class Q8PackedWeights {
 public:
  // ResourceExhausted when the host cannot hold the packed copy.
  static absl::StatusOr<Q8PackedWeights> Pack(const model::Model& model, ThreadPool& pool);

  // The panels of the tensor whose row-layout data starts at `rows`; null
  // when it was not packed (not one of the matrices above, or not Q8_0,
  // Q4_0 or Q4_1).
  const kernels::Q8PanelWeights* Find(const void* rows) const;

  // The packed copy, and the row-layout bytes it replaces (equal unless a
  // matrix's rows are not a multiple of 8: its last panel is padded).
  int64_t bytes() const { return bytes_; }
  int64_t source_bytes() const { return source_bytes_; }
  // Row-layout bytes of packed tensors that are read again from the file
  // (a tied embedding table): at most this much comes back.
  int64_t reread_bytes() const { return reread_bytes_; }
  int64_t tensors() const { return static_cast<int64_t>(by_source_.size()); }

 private:
  std::unordered_map<const void*, kernels::Q8PanelWeights> by_source_;
  std::unique_ptr<uint8_t[]> storage_;
  int64_t bytes_ = 0;
  int64_t source_bytes_ = 0;
  int64_t reread_bytes_ = 0;
};

}  // namespace kvfleet::engine
