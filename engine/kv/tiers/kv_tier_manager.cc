#include "engine/kv/tiers/kv_tier_manager.h"

#include <algorithm>
#include <chrono>
#include <new>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace kvfleet::engine {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

absl::Status KvTierOptions::Validate() const {
  if (host_bytes < 0) return absl::InvalidArgumentError("the host KV tier's size cannot be negative");
  if (!disk_dir.empty() && disk_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("the disk KV tier at '", disk_dir, "' needs a size (bytes > 0)"));
  }
  if (disk_dir.empty() && disk_bytes > 0) {
    return absl::InvalidArgumentError("a disk KV tier size was given without its directory");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<KvTierManager>> KvTierManager::Create(const KvTierOptions& options,
                                                                     std::unique_ptr<KvBlockCopier> copier,
                                                                     const KvBlockFormat& info,
                                                                     const HostMemoryAllocator& allocate_host,
                                                                     std::string_view model_id, KvEventListener* next) {
  RETURN_IF_ERROR(options.Validate());
  if (info.block_bytes <= 0 || copier == nullptr) {
    return absl::InvalidArgumentError("this executor cannot copy KV blocks to lower tiers");
  }
  std::unique_ptr<KvTierManager> m(new KvTierManager(std::move(copier), next));
  if (options.host_bytes > 0) {
    const int64_t blocks = options.host_bytes / info.block_bytes;
    if (blocks < 2) {
      return absl::InvalidArgumentError(absl::StrCat("the host KV tier needs room for two blocks of ", info.block_bytes,
                                                     " bytes; ", options.host_bytes, " bytes were given"));
    }
    std::shared_ptr<uint8_t> storage =
        allocate_host
            ? allocate_host(static_cast<size_t>(blocks * info.block_bytes))
            : std::shared_ptr<uint8_t>(new (std::nothrow) uint8_t[static_cast<size_t>(blocks * info.block_bytes)],
                                       std::default_delete<uint8_t[]>());
    if (storage == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("no host memory for a KV tier of ", options.host_bytes, " bytes; lower --kv-host-memory"));
    }
    m->host_ = std::make_unique<HostKvTier>(blocks, info.block_bytes, std::move(storage));
    m->counters_.host.capacity_blocks = blocks;
    m->counters_.host.block_bytes = info.block_bytes;
  }
  if (!options.disk_dir.empty()) {
    // Everything that decides a block's bytes: a file that differs in any
    // of it was written by another model, kernel or geometry.
    const std::string identity = absl::StrCat(std::string(model_id), "|", info.numerics,
                                              "|block_size=", info.block_size, "|block_bytes=", info.block_bytes);
    ASSIGN_OR_RETURN(m->disk_, DiskKvTier::Open({.dir = options.disk_dir,
                                                 .identity = identity,
                                                 .block_bytes = info.block_bytes,
                                                 .capacity_bytes = options.disk_bytes}));
    m->counters_.disk.capacity_blocks = m->disk_->capacity_blocks();
    m->counters_.disk.block_bytes = m->disk_->file_bytes();
    m->counters_.disk.startup_seconds_per_block = m->disk_->startup_read_seconds();
    if (m->host_ == nullptr) m->staging_.resize(static_cast<size_t>(info.block_bytes));
  }
  m->UpdateStats();
  return m;
}

KvTierManager::KvTierManager(std::unique_ptr<KvBlockCopier> copier, KvEventListener* next)
    : copier_(std::move(copier)), next_(next) {}

void KvTierManager::Attach(BlockPool& pool) {
  pool_ = &pool;
  pool.set_eviction_hook(this);
}

void KvTierManager::OnBlockStored(const BlockHash& hash, const std::optional<BlockHash>& parent) {
  on_device_[hash] = parent;
  if (next_ != nullptr) next_->OnBlockStored(hash, parent);
}

void KvTierManager::OnBlockRemoved(const BlockHash& hash) {
  const auto it = on_device_.find(hash);
  const std::optional<BlockHash> parent = it != on_device_.end() ? it->second : std::nullopt;
  if (it != on_device_.end()) on_device_.erase(it);
  AnnounceBest(hash, parent);
}

void KvTierManager::OnAllCleared() {
  on_device_.clear();
  if (next_ != nullptr) next_->OnAllCleared();
  AnnounceLowerBlocks();
}

void KvTierManager::OnSnapshot(std::span<const CachedBlock> blocks) {
  if (next_ != nullptr) next_->OnSnapshot(blocks);
  AnnounceLowerBlocks();
}

void KvTierManager::AnnounceLowerBlocks() {
  if (next_ == nullptr) return;
  struct Lower {
    BlockHash hash;
    std::optional<BlockHash> parent;
    KvTier tier;
  };
  std::vector<Lower> blocks;
  if (host_ != nullptr) {
    for (const HostKvTier::Entry& e : host_->Entries()) {
      if (e.published && !on_device_.contains(e.hash)) blocks.push_back({e.hash, e.parent, KvTier::kHost});
    }
  }
  if (disk_ != nullptr) {
    for (const DiskKvTier::Entry& e : disk_->Entries()) {
      if (e.published && !on_device_.contains(e.hash) && (host_ == nullptr || !host_->Contains(e.hash))) {
        blocks.push_back({e.hash, e.parent, KvTier::kDisk});
      }
    }
  }
  // Parents first: up each block's parents among `blocks` to one already
  // announced (or outside them), then back down. O(blocks).
  absl::flat_hash_map<BlockHash, size_t> index;
  for (size_t i = 0; i < blocks.size(); ++i) index.emplace(blocks[i].hash, i);
  std::vector<bool> announced(blocks.size(), false);
  std::vector<size_t> path;
  for (size_t start = 0; start < blocks.size(); ++start) {
    path.clear();
    for (size_t i = start; !announced[i];) {
      announced[i] = true;  // marked on the way up, so a loop of false parents ends
      path.push_back(i);
      const std::optional<BlockHash>& parent = blocks[i].parent;
      const auto p = parent.has_value() ? index.find(*parent) : index.end();
      if (p == index.end()) break;
      i = p->second;
    }
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      const Lower& b = blocks[*it];
      next_->OnBlockMoved(b.hash, b.parent, b.tier);
    }
  }
}

void KvTierManager::AnnounceBest(const BlockHash& hash, const std::optional<BlockHash>& parent) {
  if (next_ == nullptr || on_device_.contains(hash)) return;  // the device copy still serves
  if (host_ != nullptr && host_->Contains(hash)) {
    next_->OnBlockMoved(hash, parent, KvTier::kHost);
  } else if (disk_ != nullptr && disk_->Contains(hash)) {
    next_->OnBlockMoved(hash, parent, KvTier::kDisk);
  } else {
    next_->OnBlockRemoved(hash);
  }
}

void KvTierManager::BeforeEvict(BlockId block, const BlockHash& hash, bool published) {
  const auto it = on_device_.find(hash);
  const std::optional<BlockHash> parent = it != on_device_.end() ? it->second : std::nullopt;
  if (host_ != nullptr) {
    if (!host_->Touch(hash).empty()) return;  // loaded from here earlier: the copy is still good
    HostKvTier::Insertion ins = host_->Insert(hash, parent, published);
    if (ins.evicted) SpillFromHost(*ins.evicted, ins.slot);
    if (const absl::Status s = copier_->CopyKvBlockOut(block, ins.slot); !s.ok()) {
      KVFLEET_LOG_ERROR("KV block to host memory: {}", s.ToString());
      host_->Erase(hash);
      return;
    }
    counters_.host.bytes_down += host_->block_bytes();
    return;
  }
  if (disk_ != nullptr && !disk_->Contains(hash) && disk_->writable()) {
    if (const absl::Status s = copier_->CopyKvBlockOut(block, staging_); !s.ok()) {
      KVFLEET_LOG_ERROR("KV block to disk: {}", s.ToString());
      return;
    }
    WriteToDisk(hash, parent, staging_, published);
  }
}

void KvTierManager::SpillFromHost(const HostKvTier::Entry& entry, std::span<const uint8_t> bytes) {
  ++counters_.host.evictions;
  // An unpublished page (a window group's) is on the device under its own
  // hash when the pool still caches it; on_device_ knows published blocks only.
  const bool on_device = entry.published ? on_device_.contains(entry.hash) : pool_->IsCached(entry.hash);
  if (disk_ != nullptr && !disk_->Contains(entry.hash) && !on_device) {
    WriteToDisk(entry.hash, entry.parent, bytes, entry.published);
  }
  if (entry.published) AnnounceBest(entry.hash, entry.parent);
}

void KvTierManager::WriteToDisk(const BlockHash& hash, const std::optional<BlockHash>& parent,
                                std::span<const uint8_t> bytes, bool published) {
  std::vector<DiskKvTier::Entry> evicted;
  if (!disk_->Write(hash, parent, bytes, &evicted, published)) return;
  counters_.disk.bytes_down += disk_->file_bytes();
  for (const DiskKvTier::Entry& e : evicted) {
    ++counters_.disk.evictions;
    if (e.published) AnnounceBest(e.hash, e.parent);
  }
}

std::optional<BlockId> KvTierManager::LoadFromHost(const BlockHash& hash) {
  if (host_ == nullptr || pool_ == nullptr) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  // Touched first: the eviction the allocation may cause pushes out the
  // host tier's least recently used block, never this one.
  const std::span<const uint8_t> bytes = host_->Touch(hash);
  if (bytes.empty()) return std::nullopt;
  const std::optional<BlockId> block = pool_->Allocate();
  if (!block) return std::nullopt;
  if (const absl::Status s = copier_->CopyKvBlockIn(*block, bytes); !s.ok()) {
    KVFLEET_LOG_ERROR("KV block from host memory: {}", s.ToString());
    pool_->Release(*block);
    return std::nullopt;
  }
  pool_->Commit(*block, hash, host_->ParentOf(hash), host_->IsPublished(hash));
  ++counters_.host.hit_blocks;
  ++counters_.host.loads;
  counters_.host.bytes_up += host_->block_bytes();
  counters_.host.load_seconds += SecondsSince(start);
  return block;
}

bool KvTierManager::InHost(const BlockHash& hash) const { return host_ != nullptr && host_->Contains(hash); }

bool KvTierManager::CopyFromHost(const BlockHash& hash, std::span<uint8_t> out, std::optional<BlockHash>* parent,
                                 bool* published) {
  if (host_ == nullptr || !host_->Contains(hash)) return false;
  const std::span<const uint8_t> bytes = host_->Touch(hash);
  CHECK(bytes.size() == out.size()) << "a host block of " << bytes.size() << " bytes for " << out.size();
  std::copy(bytes.begin(), bytes.end(), out.begin());
  *parent = host_->ParentOf(hash);
  *published = host_->IsPublished(hash);
  return true;
}

void KvTierManager::TouchHost(const BlockHash& hash) {
  if (host_ != nullptr) host_->Touch(hash);
}

bool KvTierManager::OnDiskOnly(const BlockHash& hash) const {
  return disk_ != nullptr && disk_->Contains(hash) && (host_ == nullptr || !host_->Contains(hash));
}

void KvTierManager::StartDiskLoad(RequestId id, std::vector<BlockHash> hashes) {
  CHECK(!hashes.empty());
  Job job{.request = id};
  for (const BlockHash& hash : hashes) {
    job.entries.push_back({.hash = hash, .parent = disk_->ParentOf(hash), .published = disk_->IsPublished(hash)});
  }
  // Queued (and so made the disk's most recently used) before the device
  // blocks are taken: an allocation may evict a device block to a full
  // disk, which then gives up its least recently used, never these.
  const uint64_t job_id = next_job_++;
  disk_->Read(job_id, std::move(hashes));
  for (size_t i = 0; i < job.entries.size(); ++i) {
    const std::optional<BlockId> block = pool_->Allocate();
    CHECK(block.has_value()) << "a disk load was started for more blocks than are free";
    job.blocks.push_back(*block);
  }
  jobs_[job_id] = std::move(job);
}

void KvTierManager::ReadForPeer(std::vector<BlockHash> hashes, PeerRead done) {
  CHECK(!hashes.empty());
  Job job{.for_peer = std::move(done)};
  for (const BlockHash& hash : hashes) {
    job.entries.push_back({.hash = hash, .parent = disk_->ParentOf(hash), .published = disk_->IsPublished(hash)});
  }
  const uint64_t job_id = next_job_++;
  disk_->Read(job_id, std::move(hashes));
  jobs_[job_id] = std::move(job);
}

std::vector<BlockId> KvTierManager::BlocksInFlight() const {
  std::vector<BlockId> out;
  for (const auto& [id, job] : jobs_) out.insert(out.end(), job.blocks.begin(), job.blocks.end());
  return out;
}

std::vector<RequestId> KvTierManager::Poll() {
  std::vector<RequestId> done;
  if (disk_ != nullptr) {
    DiskKvTier::Completions c = disk_->TakeCompletions();
    for (const DiskKvTier::Entry& e : c.failed_writes) {
      ++counters_.disk.errors;
      if (e.published) AnnounceBest(e.hash, e.parent);
    }
    for (DiskKvTier::ReadResult& r : c.reads) {
      const auto it = jobs_.find(r.job);
      CHECK(it != jobs_.end()) << "a disk read finished for no load";
      Job job = std::move(it->second);
      jobs_.erase(it);
      if (job.for_peer) {
        DropFailedRead(r, job);
        std::vector<DiskKvTier::Entry> entries(job.entries.begin(),
                                               job.entries.begin() + static_cast<std::ptrdiff_t>(r.blocks.size()));
        job.for_peer(std::move(entries), std::move(r.blocks));
        continue;
      }
      FinishRead(r, job);
      done.push_back(job.request);
    }
  }
  UpdateStats();
  return done;
}

void KvTierManager::FinishRead(DiskKvTier::ReadResult& r, Job& job) {
  const auto start = std::chrono::steady_clock::now();
  size_t filled = 0;
  for (; filled < r.blocks.size(); ++filled) {
    const DiskKvTier::Entry& entry = job.entries[filled];
    const BlockId block = job.blocks[filled];
    if (pool_->IsCached(entry.hash)) continue;  // computed again meanwhile
    if (const absl::Status s = copier_->CopyKvBlockIn(block, r.blocks[filled]); !s.ok()) {
      KVFLEET_LOG_ERROR("KV block from disk: {}", s.ToString());
      break;
    }
    pool_->Commit(block, entry.hash, entry.parent, entry.published);
    ++counters_.disk.hit_blocks;
    counters_.disk.bytes_up += static_cast<int64_t>(r.blocks[filled].size());
  }
  // The last first, as a request frees: under pressure a prefix's tail is
  // evicted before its head. Blocks not filled go back empty.
  for (auto it = job.blocks.rbegin(); it != job.blocks.rend(); ++it) pool_->Release(*it);
  ++counters_.disk.loads;
  counters_.disk.load_seconds += r.seconds + SecondsSince(start);
  DropFailedRead(r, job);
}

void KvTierManager::DropFailedRead(const DiskKvTier::ReadResult& r, const Job& job) {
  if (r.error.ok() || r.blocks.size() >= r.hashes.size()) return;
  const DiskKvTier::Entry& failed = job.entries[r.blocks.size()];
  // A file gone (evicted meanwhile) is a plain miss; one that reads back
  // wrong is damage: never used, deleted, counted.
  if (!absl::IsNotFound(r.error)) {
    ++counters_.disk.errors;
    KVFLEET_LOG_WARN("disk KV tier: block {} unusable ({}); it will be recomputed", failed.hash.ToHex(),
                     r.error.ToString());
  }
  disk_->Forget(failed.hash);
  if (failed.published) AnnounceBest(failed.hash, failed.parent);
}

void KvTierManager::UpdateStats() {
  if (host_ != nullptr) counters_.host.blocks = host_->num_blocks();
  if (disk_ != nullptr) {
    counters_.disk.blocks = disk_->num_blocks();
    counters_.disk.writable = disk_->writable();
  }
  std::lock_guard<std::mutex> lock(mu_);
  published_ = counters_;
}

void KvTierManager::FlushDisk() {
  if (disk_ != nullptr) disk_->Flush();
}

KvTierStats KvTierManager::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return published_;
}

}  // namespace kvfleet::engine
