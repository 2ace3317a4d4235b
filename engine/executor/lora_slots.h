// The LoRA adapters an executor holds resident, each in a slot that a
// batch's chunks name (ForwardBatch::chunk_lora), and the segment table a
// step's AddLora kernels read (kernels/common/lora_segment.h): for every
// layer's projections, the runs of consecutive rows under one adapter.
//
// A backend keeps the adapters' weights where its kernels read them (the
// CPU reads the host copy in place; CUDA copies each into device memory)
// and tells the slots where each pair is. Which adapter sits in which slot,
// and when one is evicted, is the engine's business (engine/lora/).
//
//   LoraSlots slots(options.lora.max_loras, config.num_layers, limits.max_batch_chunks);
//   RETURN_IF_ERROR(slots.CheckFits(adapter, weights, options.lora.max_rank));
//   slots.Set(0, ResidentLora::InPlace(adapter));
//   ASSIGN_OR_RETURN(int32_t per_site, slots.BuildSegments(batch));
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/executor/forward_batch.h"
#include "kernels/common/lora_segment.h"
#include "model/arch/decoder_weights.h"
#include "model/lora/lora_adapter.h"

namespace kvfleet::engine {

// An adapter's pairs in a backend's memory: per layer and projection, A and
// B (null: the adapter leaves it alone).
struct ResidentLora {
  struct Pair {
    const float* a = nullptr;
    const float* b = nullptr;
  };
  std::shared_ptr<const model::LoraAdapter> adapter;  // what it holds, for its identity
  std::vector<std::array<Pair, model::kProjections>> layers;

  // The host copy's own pairs (the CPU reads them in place).
  static ResidentLora InPlace(std::shared_ptr<const model::LoraAdapter> adapter);
};

class LoraSlots {
 public:
  LoraSlots(int32_t num_slots, int32_t num_layers, int32_t max_chunks);

  int32_t num_slots() const { return static_cast<int32_t>(slots_.size()); }
  // INVALID_ARGUMENT naming the layer and projection when the adapter's
  // pairs do not fit these weights (another model, another tensor-parallel
  // share) or its rank is over max_rank.
  static absl::Status CheckFits(const model::LoraAdapter& adapter, const model::DecoderWeights& weights,
                                int32_t max_rank);
  // INVALID_ARGUMENT for a slot outside [0, num_slots()).
  absl::Status CheckSlot(int32_t slot) const;
  void Set(int32_t slot, ResidentLora lora) { slots_[static_cast<size_t>(slot)] = std::move(lora); }
  void Clear(int32_t slot) { slots_[static_cast<size_t>(slot)] = {}; }
  const ResidentLora* At(int32_t slot) const;

  // Lays out the batch's segments: for each site (layer × kProjections +
  // projection) `count` entries, count the same for every site, returned.
  // 0 when no chunk runs under an adapter (the table is then untouched).
  // INVALID_ARGUMENT naming the chunk when it names an empty or unknown
  // slot. Allocates nothing past the sizes given at construction.
  absl::StatusOr<int32_t> BuildSegments(const ForwardBatch& batch);
  // Rows the last BuildSegments' segments cover (each site's the same).
  int64_t segment_rows() const { return segment_rows_; }
  // The table BuildSegments filled: [num_layers × kProjections, count].
  std::span<const kernels::LoraSegment> table() const { return table_; }
  // Site s's `count` segments.
  const kernels::LoraSegment* Site(int32_t layer, model::Projection p, int32_t count) const {
    return table_.data() + (static_cast<int64_t>(layer) * model::kProjections + static_cast<int>(p)) * count;
  }

 private:
  int32_t num_layers_;
  std::vector<ResidentLora> slots_;
  std::vector<kernels::LoraSegment> table_;
  std::vector<std::array<int32_t, 3>> runs_;  // first row, rows, slot
  int64_t segment_rows_ = 0;
};

}  // namespace kvfleet::engine
