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
    if (it->second.pending()) --uncomputed_blocks_;
    blocks_.erase(it);
  }
}

void PendingPrefill::Arriving(std::span<const BlockHash> hashes) {
  for (const BlockHash& h : hashes) {
    auto it = blocks_.find(h);
    if (it == blocks_.end()) continue;
    if (it->second.pending()) --uncomputed_blocks_;
    ++it->second.arriving;
  }
}

void PendingPrefill::Arrived(std::span<const BlockHash> hashes) {
  for (const BlockHash& h : hashes) {
    auto it = blocks_.find(h);
    if (it == blocks_.end() || it->second.arriving == 0) continue;
    --it->second.arriving;
    if (it->second.pending()) ++uncomputed_blocks_;
  }
}

void PendingPrefill::OnBlockStored(const BlockHash& hash, const std::optional<BlockHash>& parent) {
  if (auto it = blocks_.find(hash); it != blocks_.end() && !it->second.computed) {
    if (it->second.pending()) --uncomputed_blocks_;
    it->second.computed = true;
  }
  if (next_ != nullptr) next_->OnBlockStored(hash, parent);
}

void PendingPrefill::OnBlockRemoved(const BlockHash& hash) {
  if (auto it = blocks_.find(hash); it != blocks_.end() && it->second.computed) {
    it->second.computed = false;
    if (it->second.pending()) ++uncomputed_blocks_;
  }
  if (next_ != nullptr) next_->OnBlockRemoved(hash);
}

void PendingPrefill::OnAllCleared() {
  uncomputed_blocks_ = 0;
  for (auto& [hash, b] : blocks_) {
    b.computed = false;
    if (b.pending()) ++uncomputed_blocks_;
  }
  if (next_ != nullptr) next_->OnAllCleared();
}

void PendingPrefill::OnSnapshot(std::span<const CachedBlock> blocks) {
  if (next_ != nullptr) next_->OnSnapshot(blocks);
}

}  // namespace kvfleet::engine
