#include "engine/kv/kv_cache_manager.h"

#include <algorithm>
#include <span>

#include "common/check.h"

namespace kvfleet::engine {

KvCacheManager::KvCacheManager(BlockPool& pool, int32_t block_size, std::string model_id, bool enable_prefix_caching)
    : pool_(pool),
      block_size_(block_size),
      model_id_(std::move(model_id)),
      enable_prefix_caching_(enable_prefix_caching) {
  CHECK_GT(block_size, 0);
}

BlockHash KvCacheManager::RootFor(const Request& req) const { return RootBlockHash(model_id_, req.params.cache_salt); }

BlockHash KvCacheManager::HashOfBlock(const Request& req, int32_t b, const BlockHash& parent) const {
  // The prompt's hashes were computed once at submission (the engine's
  // Submit): a queue head that waits for room is looked up again every
  // step, and a long prompt is hundreds of SHA-256s.
  if (b < static_cast<int32_t>(req.prompt_block_hashes.size())) {
    DCHECK(req.prompt_block_hashes[static_cast<size_t>(b)] ==
           ChainBlockHash(b == 0 ? RootFor(req) : parent,
                          std::span<const int32_t>(req.tokens.data() + b * block_size_, block_size_)))
        << "prompt_block_hashes do not match the model id and cache salt";
    return req.prompt_block_hashes[static_cast<size_t>(b)];
  }
  return ChainBlockHash(parent, std::span<const int32_t>(req.tokens.data() + b * block_size_, block_size_));
}

int32_t KvCacheManager::AcquireCachedPrefix(Request& req) {
  CHECK(req.block_table.empty()) << "request " << req.id() << " already holds blocks";
  req.kv_awaits_disk = false;
  int32_t hit_tokens = 0;
  if (enable_prefix_caching_) {
    // At most (n - 1) / block_size blocks: the last token is always computed.
    const int32_t max_blocks = (req.num_tokens() - 1) / block_size_;
    BlockHash parent = max_blocks > 0 && req.prompt_block_hashes.empty() ? RootFor(req) : BlockHash{};
    for (int32_t b = 0; b < max_blocks; ++b) {
      const BlockHash hash = HashOfBlock(req, b, parent);
      std::optional<BlockId> block = pool_.AcquireCached(hash);
      if (!block && tiers_ != nullptr) block = tiers_->LoadFromHost(hash);
      if (!block) {
        if (tiers_ != nullptr && !req.kv_load_tried && tiers_->OnDiskOnly(hash)) StartDiskLoad(req, b, hash);
        break;
      }
      req.block_table.push_back(*block);
      req.block_hashes.push_back(hash);
      parent = hash;
    }
    hit_tokens = static_cast<int32_t>(req.block_table.size()) * block_size_;
  }
  req.num_computed_tokens = hit_tokens;
  return hit_tokens;
}

std::optional<int32_t> KvCacheManager::BlocksToAdmit(const Request& req, int32_t budget) const {
  CHECK(req.block_table.empty()) << "request " << req.id() << " already holds blocks";
  int32_t hit_blocks = 0;
  int32_t taken = 0;  // of the hit blocks, those that leave the free list
  if (enable_prefix_caching_) {
    const int32_t max_blocks = (req.num_tokens() - 1) / block_size_;
    BlockHash parent = max_blocks > 0 && req.prompt_block_hashes.empty() ? RootFor(req) : BlockHash{};
    for (; hit_blocks < max_blocks; ++hit_blocks) {
      const BlockHash hash = HashOfBlock(req, hit_blocks, parent);
      if (const std::optional<BlockId> block = pool_.FindCached(hash)) {
        if (pool_.ref_count(*block) == 0) ++taken;
      } else if (tiers_ != nullptr && tiers_->InHost(hash)) {
        ++taken;
      } else {
        if (tiers_ != nullptr && !req.kv_load_tried && tiers_->OnDiskOnly(hash)) return std::nullopt;
        break;
      }
      parent = hash;
    }
  }
  const int64_t hit_tokens = static_cast<int64_t>(hit_blocks) * block_size_;
  const int64_t tokens = std::min<int64_t>(req.num_tokens(), hit_tokens + budget);
  return taken + BlocksFor(tokens) - hit_blocks;
}

void KvCacheManager::StartDiskLoad(Request& req, int32_t first, const BlockHash& first_hash) {
  const int32_t max_blocks = (req.num_tokens() - 1) / block_size_;
  std::vector<BlockHash> run = {first_hash};
  for (int32_t b = first + 1; b < max_blocks; ++b) {
    const BlockHash hash = HashOfBlock(req, b, run.back());
    if (!tiers_->OnDiskOnly(hash)) break;
    run.push_back(hash);
  }
  // One load at a time (the disk reads one file at a time anyway): loads
  // filling the device side by side would evict each other's blocks before
  // their requests are admitted. The load takes its device blocks now and
  // leaves room for the rest of the prompt.
  if (tiers_->loads_in_flight()) {
    req.kv_awaits_disk = true;
    return;
  }
  const int64_t rest = BlocksFor(req.num_tokens()) - first - static_cast<int64_t>(run.size());
  const int64_t room = pool_.num_free() - rest;
  if (room < static_cast<int64_t>(run.size())) run.resize(static_cast<size_t>(std::max<int64_t>(room, 0)));
  if (run.empty()) return;
  req.kv_load_tried = true;
  req.kv_loading = true;
  tiers_->StartDiskLoad(req.id(), std::move(run));
}

void KvCacheManager::RecordAdmission(Request& req) {
  if (req.cached_prompt_tokens >= 0) return;  // a re-admission after preemption
  req.cached_prompt_tokens = std::min(req.num_computed_tokens, req.num_prompt_tokens());
  counters_.queried_tokens += req.num_prompt_tokens();
  counters_.hit_tokens += req.cached_prompt_tokens;
}

int32_t KvCacheManager::MissingBlocks(const Request& req, int32_t num_new_tokens) const {
  const int32_t needed = BlocksFor(req.num_computed_tokens + num_new_tokens);
  return std::max(0, needed - static_cast<int32_t>(req.block_table.size()));
}

bool KvCacheManager::Allocate(Request& req, int32_t num_new_tokens) {
  const int32_t missing = MissingBlocks(req, num_new_tokens);
  if (missing <= 0) return true;
  if (pool_.num_free() < missing) return false;
  for (int32_t i = 0; i < missing; ++i) {
    const std::optional<BlockId> block = pool_.Allocate();
    CHECK(block.has_value()) << "pool reported free blocks it could not allocate";
    req.block_table.push_back(*block);
  }
  return true;
}

void KvCacheManager::CommitFullBlocks(Request& req) {
  if (!enable_prefix_caching_) return;
  const int32_t full = req.num_computed_tokens / block_size_;
  while (static_cast<int32_t>(req.block_hashes.size()) < full) {
    const int32_t b = static_cast<int32_t>(req.block_hashes.size());
    const std::optional<BlockHash> parent = b == 0 ? std::nullopt : std::optional<BlockHash>(req.block_hashes.back());
    const bool known = b < static_cast<int32_t>(req.prompt_block_hashes.size());
    const BlockHash hash =
        HashOfBlock(req, b, parent.has_value() || known ? parent.value_or(BlockHash{}) : RootFor(req));
    pool_.Commit(req.block_table[b], hash, parent);
    req.block_hashes.push_back(hash);
  }
}

void KvCacheManager::ReleaseBlocksPastTokens(Request& req) {
  const size_t keep = static_cast<size_t>(BlocksFor(req.num_tokens()));
  while (req.block_table.size() > keep) {
    const BlockId block = req.block_table.back();
    CHECK(!pool_.hash_of(block).has_value()) << "block " << block << " past the request's tokens was published";
    req.block_table.pop_back();
    pool_.Release(block);
  }
}

void KvCacheManager::Free(Request& req) {
  for (auto it = req.block_table.rbegin(); it != req.block_table.rend(); ++it) pool_.Release(*it);
  req.block_table.clear();
  req.block_hashes.clear();
  req.num_computed_tokens = 0;
}

}  // namespace kvfleet::engine
