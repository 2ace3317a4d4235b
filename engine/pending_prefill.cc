#include "engine/pending_prefill.h"

namespace kvfleet::engine {

void PendingPrefill::Add(Request& r) {
  if (prefix_caching_) {
    for (const BlockHash& h : r.prompt_block_hashes) {
      Block& b = blocks_[h];
      if (b.requests++ > 0) continue;
      b.computed = pool_ != nullptr && pool_->IsCached(h);
      if (!b.computed) ++uncomputed_blocks_;
    }
  }
  r.pending_tail_counted = true;
  tail_tokens_ += TailOf(r);
}

void PendingPrefill::Computed(Request& r) {
  if (!r.pending_tail_counted) return;
  r.pending_tail_counted = false;
  tail_tokens_ -= TailOf(r);
}

void PendingPrefill::Remove(Request& r) {
  Computed(r);
  if (!prefix_caching_) return;
  for (const BlockHash& h : r.prompt_block_hashes) {
    auto it = blocks_.find(h);
    if (it == blocks_.end() || --it->second.requests > 0) continue;
    if (!it->second.computed) --uncomputed_blocks_;
    blocks_.erase(it);
  }
}

void PendingPrefill::OnBlockStored(const BlockHash& hash, const std::optional<BlockHash>& parent) {
  if (auto it = blocks_.find(hash); it != blocks_.end() && !it->second.computed) {
    it->second.computed = true;
    --uncomputed_blocks_;
  }
  if (next_ != nullptr) next_->OnBlockStored(hash, parent);
}

void PendingPrefill::OnBlockRemoved(const BlockHash& hash) {
  if (auto it = blocks_.find(hash); it != blocks_.end() && it->second.computed) {
    it->second.computed = false;
    ++uncomputed_blocks_;
  }
  if (next_ != nullptr) next_->OnBlockRemoved(hash);
}

void PendingPrefill::OnAllCleared() {
  for (auto& [hash, b] : blocks_) b.computed = false;
  uncomputed_blocks_ = static_cast<int64_t>(blocks_.size());
  if (next_ != nullptr) next_->OnAllCleared();
}

void PendingPrefill::OnSnapshot(std::span<const CachedBlock> blocks) {
  if (next_ != nullptr) next_->OnSnapshot(blocks);
}

}  // namespace kvfleet::engine
