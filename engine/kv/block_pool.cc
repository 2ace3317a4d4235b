#include "engine/kv/block_pool.h"

#include "common/check.h"

namespace kvfleet::engine {
namespace {

size_t CheckedCount(int32_t num_blocks) {
  CHECK_GE(num_blocks, 0) << "num_blocks " << num_blocks;
  return static_cast<size_t>(num_blocks);
}

}  // namespace

BlockPool::BlockPool(int32_t num_blocks, KvEventListener* listener)
    : listener_(listener),
      ref_counts_(CheckedCount(num_blocks), 0),
      hashes_(ref_counts_.size()),
      parents_(ref_counts_.size()),
      published_(ref_counts_.size(), false),
      prev_(ref_counts_.size(), kNone),
      next_(ref_counts_.size(), kNone) {
  // Every block starts empty, in id order, so a fresh pool hands out 0, 1, ...
  for (int32_t b = 0; b < num_blocks; ++b) PushTail(b);
}

int32_t BlockPool::num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }

int32_t BlockPool::num_free() const { return num_free_; }

std::optional<BlockId> BlockPool::Allocate() {
  if (head_ == kNone) return std::nullopt;
  const int32_t b = head_;
  Unlink(b);
  if (std::optional<BlockHash>& hash = hashes_[static_cast<size_t>(b)]; hash.has_value()) {
    // Evicting: the contents are about to be overwritten, so the hash must go
    // before anyone can hit it again.
    const bool published = published_[static_cast<size_t>(b)];
    if (eviction_hook_ != nullptr) eviction_hook_->BeforeEvict(BlockId(b), *hash, published);
    --num_free_cached_;
    cache_.erase(*hash);
    const BlockHash evicted = *hash;
    hash.reset();
    if (listener_ != nullptr && published) listener_->OnBlockRemoved(evicted);
  }
  TakeIntoUse(b);
  return BlockId(b);
}

std::optional<BlockId> BlockPool::AcquireCached(const BlockHash& hash) {
  const auto it = cache_.find(hash);
  if (it == cache_.end()) return std::nullopt;
  const int32_t b = it->second.value();
  int32_t& count = ref_counts_[static_cast<size_t>(b)];
  if (count == 0) {
    Unlink(b);
    --num_free_cached_;
    TakeIntoUse(b);
  } else {
    ++count;
  }
  return BlockId(b);
}

bool BlockPool::IsCached(const BlockHash& hash) const { return cache_.contains(hash); }

std::optional<BlockId> BlockPool::FindCached(const BlockHash& hash) const {
  const auto it = cache_.find(hash);
  if (it == cache_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::Retain(BlockId block) {
  CheckId(block);
  int32_t& count = ref_counts_[static_cast<size_t>(block.value())];
  CHECK_GT(count, 0) << "Retain of free block " << block;
  ++count;
}

void BlockPool::Release(BlockId block) {
  CheckId(block);
  const int32_t b = block.value();
  int32_t& count = ref_counts_[static_cast<size_t>(b)];
  CHECK_GT(count, 0) << "Release of free block " << block << " (double free)";
  if (--count > 0) return;
  PushTail(b);
  if (hashes_[static_cast<size_t>(b)].has_value()) ++num_free_cached_;
}

void BlockPool::Commit(BlockId block, const BlockHash& hash, const std::optional<BlockHash>& parent, bool publish) {
  CheckId(block);
  const auto b = static_cast<size_t>(block.value());
  CHECK_GT(ref_counts_[b], 0) << "Commit of free block " << block;
  if (hashes_[b].has_value()) {
    CHECK(*hashes_[b] == hash) << "block " << block << " committed as " << hash.ToHex() << " but holds "
                               << hashes_[b]->ToHex();
    return;
  }
  // The first copy keeps serving hits; a duplicate stays unhashed and becomes
  // empty when released.
  if (!cache_.try_emplace(hash, block).second) return;
  hashes_[b] = hash;
  parents_[b] = parent;
  published_[b] = publish;
  if (listener_ != nullptr && publish) listener_->OnBlockStored(hash, parent);
}

void BlockPool::Clear() {
  const int32_t used = num_blocks() - num_free_;
  CHECK_EQ(used, 0) << "Clear with " << used << " blocks in use";
  for (std::optional<BlockHash>& hash : hashes_) hash.reset();
  cache_.clear();
  num_free_cached_ = 0;
  if (listener_ != nullptr) listener_->OnAllCleared();
}

int32_t BlockPool::ref_count(BlockId block) const {
  CheckId(block);
  return ref_counts_[static_cast<size_t>(block.value())];
}

std::optional<BlockHash> BlockPool::hash_of(BlockId block) const {
  CheckId(block);
  return hashes_[static_cast<size_t>(block.value())];
}

std::optional<BlockHash> BlockPool::parent_of(BlockId block) const {
  CheckId(block);
  return parents_[static_cast<size_t>(block.value())];
}

bool BlockPool::published(BlockId block) const {
  CheckId(block);
  return published_[static_cast<size_t>(block.value())];
}

std::vector<CachedBlock> BlockPool::CachedBlocks() const {
  std::vector<CachedBlock> out;
  out.reserve(cache_.size());
  for (const auto& [hash, block] : cache_) {
    const auto b = static_cast<size_t>(block.value());
    if (published_[b]) out.push_back({.hash = hash, .parent = parents_[b]});
  }
  return out;
}

BlockPoolStats BlockPool::Stats() const {
  return BlockPoolStats{
      .total = num_blocks(),
      .used = num_blocks() - num_free_,
      .cached = num_free_cached_,
      .empty = num_free_ - num_free_cached_,
  };
}

BlockPoolStats BlockPool::Recount() const {
  BlockPoolStats s{.total = num_blocks()};
  for (size_t b = 0; b < ref_counts_.size(); ++b) {
    if (ref_counts_[b] > 0) {
      ++s.used;
    } else if (hashes_[b].has_value()) {
      ++s.cached;
    } else {
      ++s.empty;
    }
  }
  return s;
}

void BlockPool::CheckId(BlockId block) const {
  CHECK(block.value() >= 0 && block.value() < num_blocks())
      << "block " << block << " out of range [0, " << num_blocks() << ")";
}

void BlockPool::PushTail(int32_t b) {
  const auto i = static_cast<size_t>(b);
  prev_[i] = tail_;
  next_[i] = kNone;
  if (tail_ == kNone) {
    head_ = b;
  } else {
    next_[static_cast<size_t>(tail_)] = b;
  }
  tail_ = b;
  ++num_free_;
}

void BlockPool::Unlink(int32_t b) {
  const auto i = static_cast<size_t>(b);
  const int32_t p = prev_[i];
  const int32_t n = next_[i];
  if (p == kNone) {
    head_ = n;
  } else {
    next_[static_cast<size_t>(p)] = n;
  }
  if (n == kNone) {
    tail_ = p;
  } else {
    prev_[static_cast<size_t>(n)] = p;
  }
  prev_[i] = kNone;
  next_[i] = kNone;
  --num_free_;
}

void BlockPool::TakeIntoUse(int32_t b) {
  int32_t& count = ref_counts_[static_cast<size_t>(b)];
  DCHECK_EQ(count, 0);
  count = 1;
}

}  // namespace kvfleet::engine
