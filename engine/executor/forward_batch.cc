#include "engine/executor/forward_batch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/common/paged_kv.h"

namespace kvfleet::engine {

absl::Status ForwardBatch::Validate(int64_t vocab_size, int64_t context_length, int64_t num_blocks,
                                    int64_t model_layers, int32_t kv_groups) const {
  if (num_layers < 0 || num_layers > model_layers) {
    return absl::InvalidArgumentError(absl::StrCat("num_layers ", num_layers, " is outside [0, ", model_layers, "]"));
  }
  if (num_kv_groups != kv_groups) {
    return absl::InvalidArgumentError(
        absl::StrCat("the batch has block tables for ", num_kv_groups, " page groups; the cache has ", kv_groups));
  }
  for (int32_t g = 0; g < num_kv_groups; ++g) {
    for (int32_t c = 0; c < num_chunks(); ++c) {
      if (chunk_size(c) <= 0 || positions[chunk_starts[c]] < 0) {
        return absl::InvalidArgumentError(absl::StrCat("chunk ", c, " is empty or starts at a negative position"));
      }
      const int64_t end = chunk_end_position(c);
      if (end > context_length) {
        return absl::InvalidArgumentError(
            absl::StrCat("chunk ", c, " reaches position ", end, ", past the model's context length ", context_length));
      }
      const int64_t blocks_needed = (end + block_size - 1) / block_size;
      const std::span<const int32_t> row = BlockTableRow(c, g);
      const int64_t present = std::find(row.begin(), row.end(), -1) - row.begin();
      if (present < blocks_needed) {
        return absl::InvalidArgumentError(
            absl::StrCat("chunk ", c, " needs ", blocks_needed, " blocks but its block table has ", present));
      }
      for (int64_t i = 0; i < blocks_needed; ++i) {
        if (row[i] < 0 || row[i] >= num_blocks) {
          return absl::InvalidArgumentError(
              absl::StrCat("chunk ", c, " names block ", row[i], " outside the cache of ", num_blocks, " blocks"));
        }
      }
    }
  }
  if (!tree_masks.empty()) RETURN_IF_ERROR(ValidateTrees());
  if (!chunk_lora.empty() && static_cast<int32_t>(chunk_lora.size()) != num_chunks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the batch names LoRA slots for ", chunk_lora.size(), " chunks of ", num_chunks()));
  }
  for (int32_t t : token_ids) {
    if (t < 0 || t >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", t, " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ForwardBatch::ValidateTrees() const {
  if (static_cast<int32_t>(tree_masks.size()) != num_tokens()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the batch has ", tree_masks.size(), " tree masks for ", num_tokens(), " tokens"));
  }
  for (int32_t c = 0; c < num_chunks(); ++c) {
    const int32_t first = chunk_starts[c];
    const bool tree = tree_masks[first] != 0;
    for (int32_t i = 0; i < chunk_size(c); ++i) {
      const uint64_t mask = tree_masks[first + i];
      if (!tree) {
        if (mask == 0) continue;
        return absl::InvalidArgumentError(absl::StrCat("chunk ", c, " has a tree mask on a token but not on its root"));
      }
      // A node sees the root, itself and nothing after itself; its position
      // is the root's plus its depth; its parent (its highest other bit)
      // sees exactly its other bits.
      const uint64_t self = uint64_t{1} << i;
      const uint64_t rest = mask & ~self;
      int32_t parent = 63;
      while (parent >= 0 && ((rest >> parent) & 1) == 0) --parent;
      const bool ok = i < 64 && (mask & 1) != 0 && (mask & self) != 0 && (mask >> i) == 1 &&
                      positions[first + i] == positions[first] + kernels::TreeMaskBits(mask) - 1 &&
                      (i == 0 || (parent >= 0 && tree_masks[first + parent] == rest));
      if (!ok) {
        return absl::InvalidArgumentError(
            absl::StrCat("chunk ", c, "'s tree mask of node ", i, " is not a path from its root to itself"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckBatchLimits(const ForwardBatch& batch, const ExecutorLimits& limits) {
  if (batch.num_tokens() > limits.max_batch_tokens || batch.num_chunks() > limits.max_batch_chunks ||
      batch.num_logits_rows() > limits.logits_rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the batch has ", batch.num_tokens(), " tokens in ", batch.num_chunks(), " chunks with ",
                     batch.num_logits_rows(), " logits rows; this executor takes at most ", limits.max_batch_tokens,
                     ", ", limits.max_batch_chunks, " and ", limits.logits_rows()));
  }
  return absl::OkStatus();
}

void ForwardBatchBuilder::Clear(int32_t num_layers) {
  batch_.num_layers = num_layers;
  batch_.want_hidden = true;
  batch_.block_size = block_size_;
  batch_.max_blocks_per_chunk = 0;
  batch_.token_ids.clear();
  batch_.positions.clear();
  batch_.token_chunk.clear();
  batch_.kv_slots.clear();
  batch_.chunk_starts.assign(1, 0);
  batch_.block_table.clear();
  batch_.num_kv_groups = kv_groups_;
  batch_.chunk_logits_starts.assign(1, 0);
  batch_.logits_tokens.clear();
  batch_.tree_masks.clear();
  batch_.chunk_lora.clear();
  staged_slots_.clear();
  staged_tables_.clear();
  staged_table_starts_.assign(1, 0);
}

void ForwardBatchBuilder::AddChunk(std::span<const model::TokenId> tokens, int32_t start_position,
                                   std::span<const BlockId> block_table, LogitsWanted logits,
                                   std::span<const int32_t> tree_parents, int32_t lora_slot) {
  const int32_t chunk = batch_.num_chunks();
  // Slots start with the first adapter's chunk: every earlier one is the base model's.
  if (lora_slot >= 0 || !batch_.chunk_lora.empty()) {
    batch_.chunk_lora.resize(static_cast<size_t>(chunk), -1);
    batch_.chunk_lora.push_back(lora_slot);
  }
  const int32_t first_token = batch_.num_tokens();
  const int64_t end = static_cast<int64_t>(start_position) + static_cast<int64_t>(tokens.size());
  const size_t groups = static_cast<size_t>(kv_groups_);
  const size_t blocks =
      std::min(block_table.size() / groups, static_cast<size_t>((end + block_size_ - 1) / block_size_));
  // Group-interleaved, as the request holds them; Finish lays them out.
  const auto page = [&](size_t i) {
    const int32_t p = block_table[i].value();
    return p < 0 && groups > 1 ? null_page_ : p;
  };
  for (size_t i = 0; i < blocks * groups; ++i) staged_tables_.push_back(page(i));
  staged_table_starts_.push_back(static_cast<int32_t>(staged_tables_.size()));
  batch_.max_blocks_per_chunk = std::max(batch_.max_blocks_per_chunk, static_cast<int32_t>(blocks));

  const bool tree = !tree_parents.empty();
  // Masks start with the first tree chunk: every earlier token's is 0.
  if (tree && batch_.tree_masks.empty()) batch_.tree_masks.assign(batch_.token_ids.size(), 0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    // Where the token's K/V go; a tree node's position is its depth's.
    const int32_t pos = start_position + static_cast<int32_t>(i);
    const size_t block = static_cast<size_t>(pos / block_size_);
    batch_.token_ids.push_back(tokens[i]);
    if (tree) {
      const int32_t parent = i < tree_parents.size() ? tree_parents[i] : -1;
      // A parent must come first; a malformed one makes a mask Validate refuses.
      const uint64_t parent_mask = parent >= 0 && static_cast<size_t>(parent) < i && i < 64
                                       ? batch_.tree_masks[static_cast<size_t>(first_token + parent)]
                                       : 0;
      const uint64_t mask = i < 64 ? parent_mask | (uint64_t{1} << i) : 0;
      batch_.tree_masks.push_back(mask);
      batch_.positions.push_back(start_position + kernels::TreeMaskBits(mask) - 1);
    } else {
      if (!batch_.tree_masks.empty()) batch_.tree_masks.push_back(0);
      batch_.positions.push_back(pos);
    }
    batch_.token_chunk.push_back(chunk);
    // A table too short to hold the token leaves -1, which Validate reports.
    for (size_t g = 0; g < groups; ++g) {
      staged_slots_.push_back(pos >= 0 && block < blocks
                                  ? static_cast<int64_t>(page(block * groups + g)) * block_size_ + pos % block_size_
                                  : -1);
    }
  }
  batch_.chunk_starts.push_back(batch_.num_tokens());
  const int32_t n = static_cast<int32_t>(tokens.size());
  if (logits == LogitsWanted::kAll) {
    for (int32_t i = 0; i < n; ++i) batch_.logits_tokens.push_back(first_token + i);
  } else if (logits == LogitsWanted::kLast && n > 0) {
    batch_.logits_tokens.push_back(first_token + n - 1);
  }
  batch_.chunk_logits_starts.push_back(batch_.num_logits_rows());
}

const ForwardBatch& ForwardBatchBuilder::Finish() {
  const int32_t width = batch_.max_blocks_per_chunk;
  const int64_t groups = kv_groups_;
  const int64_t per_group = batch_.group_table_size();
  batch_.block_table.assign(static_cast<size_t>(groups * per_group), -1);
  for (int32_t c = 0; c < batch_.num_chunks(); ++c) {
    const int64_t first = staged_table_starts_[c];
    const int64_t blocks = (staged_table_starts_[c + 1] - first) / groups;
    for (int64_t g = 0; g < groups; ++g) {
      int32_t* row = batch_.block_table.data() + g * per_group + static_cast<int64_t>(c) * width;
      for (int64_t i = 0; i < blocks; ++i) row[i] = staged_tables_[static_cast<size_t>(first + i * groups + g)];
    }
  }
  const int64_t tokens = batch_.num_tokens();
  batch_.kv_slots.resize(static_cast<size_t>(groups * tokens));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t t = 0; t < tokens; ++t) {
      batch_.kv_slots[static_cast<size_t>(g * tokens + t)] = staged_slots_[static_cast<size_t>(t * groups + g)];
    }
  }
  return batch_;
}

}  // namespace kvfleet::engine
