// A model's matmul weights repacked into the 8-bit activation kernels'
// panels (kernels/cpu/q8_panels.h), once, when a CPU executor runs with
// --cpu-activations q8. After packing, the mapped file's pages of every
// packed tensor are dropped, so the weights are not held twice; the one
// tensor something else still reads in the row layout (the embedding table,
// when the output head shares it) comes back from the file page by page, as
// tokens need its rows.
//
//   ASSIGN_OR_RETURN(Q8PackedWeights packed, Q8PackedWeights::Pack(model, pool));
//   if (const kernels::Q8PanelWeights* w = packed.Find(view.data)) kernels::MatMulQ8(*w, x, m, y, pool);
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "common/thread_pool.h"
#include "kernels/cpu/q8_panels.h"
#include "model/llama_model.h"

namespace kvfleet::engine {

class Q8PackedWeights {
 public:
  static Q8PackedWeights Pack(const model::LlamaModel& model, ThreadPool& pool);

  // The panels of the tensor whose row-layout data starts at `rows`; null
  // when it was not packed (not Q8_0, Q4_0 or Q4_1).
  const kernels::Q8PanelWeights* Find(const void* rows) const;

  // The packed copy, and the row-layout bytes it replaces (equal unless a
  // matrix's rows are not a multiple of 8: its last panel is padded).
  int64_t bytes() const { return bytes_; }
  int64_t source_bytes() const { return source_bytes_; }
  int64_t tensors() const { return static_cast<int64_t>(by_source_.size()); }

 private:
  std::unordered_map<const void*, kernels::Q8PanelWeights> by_source_;
  std::unique_ptr<uint8_t[]> storage_;
  int64_t bytes_ = 0;
  int64_t source_bytes_ = 0;
};

}  // namespace kvfleet::engine
