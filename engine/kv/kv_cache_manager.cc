#include "engine/kv/kv_cache_manager.h"

#include <algorithm>
#include <limits>
#include <span>

#include "common/check.h"

namespace kvfleet::engine {

KvCacheManager::KvCacheManager(BlockPool& pool, int32_t block_size, std::string model_id, bool enable_prefix_caching,
                               std::vector<int64_t> group_windows, std::string model_fingerprint)
    : pool_(pool),
      block_size_(block_size),
      group_windows_(std::move(group_windows)),
      model_id_(std::move(model_id)),
      model_fingerprint_(std::move(model_fingerprint)),
      enable_prefix_caching_(enable_prefix_caching) {
  CHECK_GT(block_size, 0);
  CHECK(!group_windows_.empty() && group_windows_[0] == 0) << "page group 0 must attend to every key";
}

BlockHash KvCacheManager::PageHash(const BlockHash& block_hash, int32_t group) {
  // A fixed, distinct mask per group: as unforgeable as the block hash.
  const uint64_t g = static_cast<uint64_t>(group);
  return group == 0 ? block_hash
                    : BlockHash{.hi = block_hash.hi ^ (g * 0x9E3779B97F4A7C15ull),
                                .lo = block_hash.lo ^ (g * 0xC2B2AE3D27D4EB4Full)};
}

std::vector<BlockHash> KvCacheManager::PagesOfHit(std::span<const BlockHash> hashes) const {
  std::vector<BlockHash> pages(hashes.begin(), hashes.end());
  const int32_t n = static_cast<int32_t>(hashes.size());
  for (int32_t g = 1; g < num_groups(); ++g) {
    for (int32_t b = FirstBlockInWindow(g, static_cast<int64_t>(n) * block_size_); b < n; ++b) {
      pages.push_back(PageHash(hashes[static_cast<size_t>(b)], g));
    }
  }
  return pages;
}

int32_t KvCacheManager::FirstBlockInWindow(int32_t group, int64_t next_position) const {
  const int64_t w = group_windows_[static_cast<size_t>(group)];
  if (w <= 0) return 0;
  const int64_t first_key = next_position - w + 1;
  return first_key > 0 ? static_cast<int32_t>(first_key / block_size_) : 0;
}

int32_t KvCacheManager::MostPagesHeld(int64_t tokens, int32_t chunk_tokens) const {
  const int64_t blocks = BlocksFor(tokens);
  int64_t pages = 0;
  for (int64_t w : group_windows_) {
    // A chunk's blocks and those its first token's window reaches before
    // it, plus two where they share a block or start unaligned.
    pages += w > 0 ? std::min<int64_t>(blocks, BlocksFor(w - 1) + BlocksFor(chunk_tokens) + 2) : blocks;
  }
  return static_cast<int32_t>(std::min<int64_t>(pages, std::numeric_limits<int32_t>::max()));
}

bool KvCacheManager::Findable(const BlockHash& hash, bool through_disk) const {
  if (pool_.IsCached(hash)) return true;
  return tiers_ != nullptr && (tiers_->InHost(hash) || (through_disk && tiers_->OnDiskOnly(hash)));
}

std::vector<BlockHash> KvCacheManager::ProbePrefix(const Request& req, bool through_disk, size_t* above_disk) const {
  std::vector<BlockHash> hashes;
  size_t above = std::numeric_limits<size_t>::max();
  const int32_t max_blocks = (req.num_tokens() - 1) / block_size_;
  BlockHash parent = max_blocks > 0 && req.prompt_block_hashes.empty() ? RootFor(req) : BlockHash{};
  for (int32_t b = 0; b < max_blocks; ++b) {
    const BlockHash hash = HashOfBlock(req, b, parent);
    if (!Findable(hash, /*through_disk=*/false)) {
      if (!through_disk || !tiers_->OnDiskOnly(hash)) break;
      above = std::min(above, hashes.size());
    }
    hashes.push_back(hash);
    parent = hash;
  }
  *above_disk = std::min(above, hashes.size());
  return hashes;
}

std::vector<BlockHash> KvCacheManager::ProbeWindowedHit(const Request& req, WindowedDiskHit* longer) const {
  // Through the disk only when a load could follow; one walk serves both.
  const bool through_disk = tiers_ != nullptr && tiers_->has_disk() && !req.kv_load_tried;
  size_t above_disk = 0;
  std::vector<BlockHash> hashes = ProbePrefix(req, through_disk, &above_disk);
  const int32_t hit_now = LongestWindowedHit(std::span<const BlockHash>(hashes).first(above_disk));
  *longer = through_disk ? LongerHitOnDisk(hashes, hit_now) : WindowedDiskHit{};
  hashes.resize(static_cast<size_t>(hit_now));
  return hashes;
}

int32_t KvCacheManager::LongestWindowedHit(std::span<const BlockHash> hashes, bool through_disk) const {
  // A hit of `hit` blocks needs pages [FirstBlockInWindow(hit), hit) of
  // each window group; a missing page at block b rules out every hit that
  // reaches b, so the search goes straight down to b.
  int32_t hit = static_cast<int32_t>(hashes.size());
  while (hit > 0) {
    int32_t missing = -1;
    for (int32_t g = 1; g < num_groups() && missing < 0; ++g) {
      for (int32_t b = hit - 1; b >= FirstBlockInWindow(g, static_cast<int64_t>(hit) * block_size_); --b) {
        if (!Findable(PageHash(hashes[static_cast<size_t>(b)], g), through_disk)) {
          missing = b;
          break;
        }
      }
    }
    if (missing < 0) return hit;
    hit = missing;
  }
  return 0;
}

KvCacheManager::WindowedDiskHit KvCacheManager::LongerHitOnDisk(std::span<const BlockHash> hashes,
                                                                int32_t hit_now) const {
  WindowedDiskHit hit;
  const int32_t n = LongestWindowedHit(hashes, /*through_disk=*/true);
  if (n <= hit_now) return hit;
  hit.blocks = n;
  // The window groups' pages first, group 0's after: a load returns its
  // pages last first, so under pressure group 0's tail goes before the
  // window pages, without which no part of the hit is usable.
  for (int32_t g = 1; g < num_groups(); ++g) {
    for (int32_t b = FirstBlockInWindow(g, static_cast<int64_t>(n) * block_size_); b < n; ++b) {
      hit.pages.push_back(PageHash(hashes[static_cast<size_t>(b)], g));
    }
  }
  hit.pages.insert(hit.pages.end(), hashes.begin(), hashes.begin() + n);
  for (const BlockHash& page : hit.pages) {
    if (!pool_.IsCached(page) && tiers_->OnDiskOnly(page)) hit.from_disk.push_back(page);
  }
  return hit;
}

bool KvCacheManager::StartWindowedDiskLoad(Request& req, WindowedDiskHit hit) {
  if (hit.from_disk.empty()) return false;
  if (tiers_->loads_in_flight()) {  // one load at a time, as StartDiskLoad
    req.kv_awaits_disk = true;
    return true;
  }
  // The hit's pages already on the device are held while the load takes
  // its pages, so that its allocations cannot evict them; those in host
  // memory become its most recently used, so that the device pages those
  // allocations push down do not spill them to disk first.
  std::vector<BlockId> held;
  for (const BlockHash& page : hit.pages) {
    if (const std::optional<BlockId> b = pool_.AcquireCached(page)) {
      held.push_back(*b);
    } else {
      tiers_->TouchHost(page);
    }
  }
  // Room for the load and for group 0's pages of the rest of the prompt.
  const int64_t rest = BlocksFor(req.num_tokens()) - static_cast<int64_t>(hit.blocks);
  const bool room = pool_.num_free() - rest >= static_cast<int64_t>(hit.from_disk.size());
  if (room) {
    req.kv_load_tried = true;
    req.kv_loading = true;
    tiers_->StartDiskLoad(req.id(), std::move(hit.from_disk));
  }
  for (auto it = held.rbegin(); it != held.rend(); ++it) pool_.Release(*it);
  return room;
}

bool KvCacheManager::AcquireWindowPages(Request& req, std::span<const BlockHash> hashes) {
  const int32_t n = static_cast<int32_t>(hashes.size());
  // Device copies in the first pass, host memory's in the second (see
  // AcquireCachedPrefix).
  for (const bool from_host : {false, true}) {
    for (int32_t g = 1; g < num_groups(); ++g) {
      for (int32_t b = FirstBlockInWindow(g, static_cast<int64_t>(n) * block_size_); b < n; ++b) {
        BlockId& entry = req.block_table[static_cast<size_t>(b * num_groups() + g)];
        if (entry != kFreedPage) continue;
        const BlockHash hash = PageHash(hashes[static_cast<size_t>(b)], g);
        const std::optional<BlockId> page = !from_host          ? pool_.AcquireCached(hash)
                                            : tiers_ != nullptr ? tiers_->LoadFromHost(hash)
                                                                : std::nullopt;
        if (page) {
          entry = *page;
        } else if (from_host) {
          return false;
        }
      }
    }
  }
  return true;
}

void KvCacheManager::ReleasePassedWindowPages(Request& req) {
  const int32_t groups = num_groups();
  for (int32_t g = 1; g < groups; ++g) {
    // Pages before the first the next position reads; those already given
    // back are a prefix of them, so the walk back stops at the first.
    const int32_t passed = std::min(FirstBlockInWindow(g, req.num_computed_tokens), HeldBlocks(req));
    for (int32_t b = passed - 1; b >= 0; --b) {
      BlockId& page = req.block_table[static_cast<size_t>(b * groups + g)];
      if (page == kFreedPage) break;
      pool_.Release(page);
      page = kFreedPage;
    }
  }
}

BlockHash KvCacheManager::RootFor(const Request& req) const {
  return RootBlockHash(model_id_, model_fingerprint_, req.params.cache_salt, req.lora_identity);
}

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

int32_t KvCacheManager::AcquireWindowedPrefix(Request& req) {
  // Group 0 as far as the device and host memory hold it, cut to where the
  // window pages go, before anything is copied up.
  WindowedDiskHit longer;
  std::vector<BlockHash> hashes = ProbeWindowedHit(req, &longer);
  if (StartWindowedDiskLoad(req, std::move(longer))) {
    return 0;  // the disk holds a longer hit: the request waits for it, holding nothing
  }
  const size_t groups = static_cast<size_t>(num_groups());
  // What the device holds first (taking it needs no free page), then the
  // copies up from host memory, whose allocations can then evict only
  // pages this lookup does not need.
  req.block_table.assign(hashes.size() * groups, kFreedPage);
  for (size_t b = 0; b < hashes.size(); ++b) {
    req.block_table[b * groups] = pool_.AcquireCached(hashes[b]).value_or(kFreedPage);
  }
  bool whole = AcquireWindowPages(req, hashes);
  size_t taken = 0;
  for (; whole && taken < hashes.size(); ++taken) {
    if (req.block_table[taken * groups] != kFreedPage) continue;
    const std::optional<BlockId> block = tiers_ != nullptr ? tiers_->LoadFromHost(hashes[taken]) : std::nullopt;
    if (!block) break;
    req.block_table[taken * groups] = *block;
  }
  if (whole && taken < hashes.size()) {
    // No device page for a host block (or a copy evicted a later one):
    // keep the run before it, with the window pages that run reaches.
    for (size_t e = taken * groups; e < req.block_table.size(); ++e) {
      if (req.block_table[e] != kFreedPage) pool_.Release(req.block_table[e]);
    }
    req.block_table.resize(taken * groups);
    hashes.resize(taken);
    whole = AcquireWindowPages(req, hashes);
  }
  if (!whole) {
    for (BlockId page : req.block_table) {
      if (page != kFreedPage) pool_.Release(page);
    }
    req.block_table.clear();
    hashes.clear();
  }
  req.block_hashes = std::move(hashes);
  return HeldBlocks(req) * block_size_;
}

int32_t KvCacheManager::AcquireCachedPrefix(Request& req) {
  CHECK(req.block_table.empty()) << "request " << req.id() << " already holds blocks";
  req.kv_awaits_disk = false;
  if (req.params.kv_peer.has_value() && !req.kv_peer_tried && start_peer_pull_ != nullptr) {
    req.kv_peer_tried = true;
    if (start_peer_pull_(req)) return 0;  // it waits for the pull (kv_loading)
  }
  int32_t hit_tokens = 0;
  if (enable_prefix_caching_ && num_groups() > 1) {
    hit_tokens = AcquireWindowedPrefix(req);
  } else if (enable_prefix_caching_) {
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
  if (enable_prefix_caching_ && num_groups() > 1) {
    WindowedDiskHit longer;
    const std::vector<BlockHash> hashes = ProbeWindowedHit(req, &longer);
    if (!longer.from_disk.empty()) return std::nullopt;
    hit_blocks = static_cast<int32_t>(hashes.size());
    for (int32_t b = 0; b < hit_blocks; ++b) {
      const std::optional<BlockId> block = pool_.FindCached(hashes[static_cast<size_t>(b)]);
      if (!block || pool_.ref_count(*block) == 0) ++taken;
    }
    for (int32_t g = 1; g < num_groups(); ++g) {
      for (int32_t b = FirstBlockInWindow(g, static_cast<int64_t>(hit_blocks) * block_size_); b < hit_blocks; ++b) {
        const std::optional<BlockId> page = pool_.FindCached(PageHash(hashes[static_cast<size_t>(b)], g));
        if (!page || pool_.ref_count(*page) == 0) ++taken;  // in host memory, or off the free list
      }
    }
  } else if (enable_prefix_caching_) {
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
  return taken + (BlocksFor(tokens) - hit_blocks) * num_groups();
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
  return std::max(0, needed - HeldBlocks(req)) * num_groups();
}

bool KvCacheManager::Allocate(Request& req, int32_t num_new_tokens) {
  const int32_t missing = MissingBlocks(req, num_new_tokens);
  if (missing <= 0) return true;
  if (pool_.num_free() < missing) return false;
  // Pages of new blocks, every group's: a new block holds a token to compute.
  for (int32_t i = 0; i < missing; ++i) {
    const std::optional<BlockId> block = pool_.Allocate();
    CHECK(block.has_value()) << "pool reported free blocks it could not allocate";
    req.block_table.push_back(*block);
  }
  return true;
}

void KvCacheManager::CommitFullBlocks(Request& req) {
  const size_t groups = static_cast<size_t>(num_groups());
  const int32_t full = enable_prefix_caching_ ? req.num_computed_tokens / block_size_ : 0;
  while (static_cast<int32_t>(req.block_hashes.size()) < full) {
    const int32_t b = static_cast<int32_t>(req.block_hashes.size());
    const std::optional<BlockHash> parent = b == 0 ? std::nullopt : std::optional<BlockHash>(req.block_hashes.back());
    const bool known = b < static_cast<int32_t>(req.prompt_block_hashes.size());
    const BlockHash hash =
        HashOfBlock(req, b, parent.has_value() || known ? parent.value_or(BlockHash{}) : RootFor(req));
    pool_.Commit(req.block_table[static_cast<size_t>(b) * groups], hash, parent);
    for (size_t g = 1; g < groups; ++g) {
      const BlockId page = req.block_table[static_cast<size_t>(b) * groups + g];
      if (page != kFreedPage) pool_.Commit(page, PageHash(hash, static_cast<int32_t>(g)), std::nullopt, false);
    }
    req.block_hashes.push_back(hash);
  }
  if (groups > 1) ReleasePassedWindowPages(req);
}

void KvCacheManager::ReleaseBlocksPastTokens(Request& req) {
  const size_t keep = static_cast<size_t>(BlocksFor(req.num_tokens())) * static_cast<size_t>(num_groups());
  while (req.block_table.size() > keep) {
    const BlockId block = req.block_table.back();
    req.block_table.pop_back();
    if (block == kFreedPage) continue;
    CHECK(!pool_.hash_of(block).has_value()) << "block " << block << " past the request's tokens was published";
    pool_.Release(block);
  }
}

void KvCacheManager::Free(Request& req) {
  for (auto it = req.block_table.rbegin(); it != req.block_table.rend(); ++it) {
    if (*it != kFreedPage) pool_.Release(*it);
  }
  req.block_table.clear();
  req.block_hashes.clear();
  req.num_computed_tokens = 0;
}

}  // namespace kvfleet::engine
