#include "engine/executor/lora_slots.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvfleet::engine {

ResidentLora ResidentLora::InPlace(std::shared_ptr<const model::LoraAdapter> adapter) {
  ResidentLora r;
  r.layers.resize(adapter->layers.size());
  for (size_t l = 0; l < adapter->layers.size(); ++l) {
    for (int p = 0; p < model::kProjections; ++p) {
      if (const std::optional<model::LoraPair>& pair = adapter->layers[l][static_cast<size_t>(p)]) {
        r.layers[l][static_cast<size_t>(p)] = {.a = pair->a.data(), .b = pair->b.data()};
      }
    }
  }
  r.adapter = std::move(adapter);
  return r;
}

LoraSlots::LoraSlots(int32_t num_slots, int32_t num_layers, int32_t max_chunks)
    : num_layers_(num_layers), slots_(static_cast<size_t>(std::max(num_slots, 0))) {
  if (num_slots > 0) {
    table_.reserve(static_cast<size_t>(num_layers) * model::kProjections * static_cast<size_t>(max_chunks));
    runs_.reserve(static_cast<size_t>(max_chunks));
  }
}

absl::Status LoraSlots::CheckFits(const model::LoraAdapter& adapter, const model::DecoderWeights& weights,
                                  int32_t max_rank) {
  if (adapter.rank < 1 || adapter.rank > max_rank) {
    return absl::InvalidArgumentError(absl::StrCat("adapter '", adapter.name, "' has rank ", adapter.rank,
                                                   "; this worker takes ranks up to --max-lora-rank ", max_rank));
  }
  if (adapter.layers.size() != weights.layers.size()) {
    return absl::InvalidArgumentError(absl::StrCat("adapter '", adapter.name, "' has ", adapter.layers.size(),
                                                   " layers; the model has ", weights.layers.size()));
  }
  for (size_t l = 0; l < adapter.layers.size(); ++l) {
    const auto matrices = weights.layers[l].Matrices();
    for (int p = 0; p < model::kProjections; ++p) {
      const std::optional<model::LoraPair>& pair = adapter.layers[l][static_cast<size_t>(p)];
      if (!pair.has_value()) continue;
      const model::WeightView& w = *matrices[static_cast<size_t>(p)];
      const int64_t rank = adapter.rank;
      if (pair->in != w.cols || pair->out != w.rows || static_cast<int64_t>(pair->a.size()) != rank * w.cols ||
          static_cast<int64_t>(pair->b.size()) != w.rows * rank) {
        return absl::InvalidArgumentError(
            absl::StrCat("adapter '", adapter.name, "' changes layer ", l, "'s ",
                         std::string(model::LoraTargetModule(static_cast<model::Projection>(p))), " as [", pair->out,
                         ", ", pair->in, "]; the weights here are [", w.rows, ", ", w.cols, "]"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status LoraSlots::CheckSlot(int32_t slot) const {
  if (slot < 0 || slot >= num_slots()) {
    return absl::InvalidArgumentError(absl::StrCat("LoRA slot ", slot, " is outside [0, ", num_slots(), ")"));
  }
  return absl::OkStatus();
}

const ResidentLora* LoraSlots::At(int32_t slot) const {
  if (slot < 0 || slot >= num_slots()) return nullptr;
  const ResidentLora& r = slots_[static_cast<size_t>(slot)];
  return r.adapter != nullptr ? &r : nullptr;
}

absl::StatusOr<int32_t> LoraSlots::BuildSegments(const ForwardBatch& batch) {
  segment_rows_ = 0;
  if (batch.chunk_lora.empty()) return 0;
  runs_.clear();
  for (int32_t c = 0; c < batch.num_chunks(); ++c) {
    const int32_t slot = batch.chunk_lora[static_cast<size_t>(c)];
    if (slot < 0) continue;
    if (At(slot) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk ", c, " runs under LoRA slot ", slot, ", which holds no adapter"));
    }
    const int32_t first = batch.chunk_starts[static_cast<size_t>(c)];
    // A run continues while consecutive chunks share the slot.
    segment_rows_ += batch.chunk_size(c);
    if (!runs_.empty() && runs_.back()[2] == slot && runs_.back()[0] + runs_.back()[1] == first) {
      runs_.back()[1] += batch.chunk_size(c);
    } else {
      runs_.push_back({first, batch.chunk_size(c), slot});
    }
  }
  const int32_t count = static_cast<int32_t>(runs_.size());
  if (count == 0) return 0;
  table_.resize(static_cast<size_t>(num_layers_) * model::kProjections * static_cast<size_t>(count));
  for (int32_t l = 0; l < num_layers_; ++l) {
    for (int p = 0; p < model::kProjections; ++p) {
      kernels::LoraSegment* site = table_.data() + (static_cast<int64_t>(l) * model::kProjections + p) * count;
      for (int32_t i = 0; i < count; ++i) {
        const auto& [first, rows, slot] = runs_[static_cast<size_t>(i)];
        const ResidentLora& r = slots_[static_cast<size_t>(slot)];
        const ResidentLora::Pair& pair = r.layers[static_cast<size_t>(l)][static_cast<size_t>(p)];
        site[i] = {.first_row = first,
                   .rows = rows,
                   .rank = r.adapter->rank,
                   .scale = static_cast<float>(r.adapter->scale),
                   .a = pair.a,
                   .b = pair.b};
      }
    }
  }
  return count;
}

}  // namespace kvfleet::engine
