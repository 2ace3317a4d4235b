// The engine's side of moving KV between workers (engine/kv/transfer/):
// serving a peer's pull (ExportKvBlocks) and pulling a request's prefix
// from the peer its kv_peer names, on the engine thread, between steps.
#include <algorithm>
#include <chrono>
#include <span>
#include <string>

#include "absl/strings/ascii.h"
#include "engine/engine.h"

namespace kvfleet::engine {

void Engine::ExportKvBlocks(std::vector<BlockHash> hashes, KvExportDone done, std::string lease_id) {
  if (!lease_id.empty()) {
    if (std::optional<std::vector<KvBlockBytes>> staged = TakeStaged(lease_id, hashes)) {
      done(*std::move(staged));
      return;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.exports.push_back({std::move(hashes), std::move(done), std::move(lease_id)});
  }
  wake_.notify_one();
}

void Engine::RenewKvLease(std::string lease_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.renewals.push_back(std::move(lease_id));
  }
  wake_.notify_one();
}

void Engine::RenewQueuedHandoffLeases(std::chrono::steady_clock::time_point now) {
  for (auto it = queued_handoffs_.begin(); it != queued_handoffs_.end();) {
    auto next = std::next(it);
    const auto req = requests_.find(it->first);
    if (req == requests_.end() || req->second->kv_peer_tried) {
      queued_handoffs_.erase(it);
    } else if (now >= it->second) {
      const KvPeerSource& peer = *req->second->params.kv_peer;
      options_.kv_peer_fetcher->RenewLease(peer.endpoint, peer.lease_id);
      it->second = now + options_.kv_lease_duration / 3;
    }
    it = next;
  }
}

bool Engine::HeldHere(const BlockHash& hash) const {
  if (pool_.IsCached(hash)) return true;
  return options_.kv_tiers != nullptr && (options_.kv_tiers->InHost(hash) || options_.kv_tiers->OnDiskOnly(hash));
}

std::vector<BlockHash> Engine::PeerHitPages(const Request& req) const {
  const std::optional<KvPeerSource>& peer = req.params.kv_peer;
  if (!peer.has_value() || options_.kv_peer_fetcher == nullptr || executor_.info().kv_block_bytes <= 0) return {};
  // The last prompt token is always computed (its logits), so a block that
  // ends the prompt would arrive for nothing.
  const int64_t reachable = std::max<int64_t>(req.num_tokens() - 1, 0) / kv_.block_size();
  const size_t held = static_cast<size_t>(
      std::min<int64_t>({std::max(peer->blocks, 0), static_cast<int64_t>(req.prompt_block_hashes.size()), reachable}));
  // With page groups, the window pages the hit's end reaches too (under
  // their derived hashes).
  return kv_.PagesOfHit(std::span(req.prompt_block_hashes).first(held));
}

std::vector<BlockHash> Engine::ClaimPullAtArrival(Request& req) {
  if (!req.params.kv_peer.has_value() || req.params.kv_peer->lease_id.empty()) return {};
  std::vector<BlockHash> wanted = PeerHitPages(req);
  if (wanted.empty()) return {};
  req.kv_peer_tried = true;
  req.kv_loading = true;
  req.kv_pulling = wanted;
  ++pulls_in_flight_;
  return wanted;
}

bool Engine::StartPeerPull(Request& req) {
  // The hit's pages that no tier here holds.
  std::vector<BlockHash> wanted;
  for (const BlockHash& page : PeerHitPages(req)) {
    if (!HeldHere(page)) wanted.push_back(page);
  }
  // No more than the free blocks can take: past them, committing the last
  // pulled blocks would evict the first.
  wanted.resize(std::min<size_t>(wanted.size(), static_cast<size_t>(std::max(pool_.num_free(), 0))));
  if (wanted.empty()) return false;
  req.kv_peer_tried = true;
  req.kv_loading = true;
  req.kv_pulling = wanted;
  pending_prefill_.Arriving(wanted);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++pulls_in_flight_;
  }
  FetchFromPeer(req.id(), *req.params.kv_peer, req.lora_identity, std::move(wanted));
  return true;
}

void Engine::FetchFromPeer(RequestId id, const KvPeerSource& peer, const std::string& adapter,
                           std::vector<BlockHash> wanted) {
  const int64_t asked = static_cast<int64_t>(wanted.size());
  const auto started = std::chrono::steady_clock::now();
  options_.kv_peer_fetcher->Fetch(
      peer.endpoint, adapter, std::move(wanted), peer.lease_id,
      [this, id, asked, started](std::vector<KvBlockBytes> blocks, absl::Status status) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          inbox_.pulled.push_back(
              {.id = id, .asked = asked, .blocks = std::move(blocks), .status = std::move(status), .started = started});
          --pulls_in_flight_;
        }
        wake_.notify_all();
      });
}

void Engine::FinishPeerPull(Inbox::Pulled& pulled) {
  const auto it = requests_.find(pulled.id);
  int64_t committed = 0;
  if (it != requests_.end()) {
    const size_t block_bytes = static_cast<size_t>(executor_.info().kv_block_bytes);
    // Held until all are in, so that allocating the next never evicts one
    // just committed; then released last first, to the free list's tail,
    // where this step's admission finds them (the head last: evicted last).
    std::vector<BlockId> held;
    for (const KvBlockBytes& b : pulled.blocks) {
      if (!pool_.IsCached(b.hash)) {
        if (b.bytes.size() != block_bytes) break;  // the transport checks this; never trust it twice
        const std::optional<BlockId> block = pool_.Allocate();
        if (!block.has_value()) break;  // the cache is full of running requests: compute the rest
        if (!executor_.CopyKvBlockIn(*block, b.bytes).ok()) {
          pool_.Release(*block);
          break;
        }
        pool_.Commit(*block, b.hash, b.parent, b.published);
        held.push_back(*block);
        kv_peer_stats_.bytes_pulled += static_cast<int64_t>(block_bytes);
      }
      ++committed;
    }
    for (auto b = held.rbegin(); b != held.rend(); ++b) pool_.Release(*b);
    it->second->kv_loading = false;
    pending_prefill_.Arrived(it->second->kv_pulling);  // what did not come is to compute
    it->second->kv_pulling.clear();
  }
  kv_peer_stats_.blocks_pulled += committed;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - pulled.started).count();
  kv_peer_stats_.pull_seconds += seconds;
  if (committed > 0) {
    // Smoothed over about the last five pulls: the network and the peers'
    // load drift, and one slow pull should not price the next ones alone.
    const double per_block = seconds / static_cast<double>(committed);
    double& smoothed = kv_peer_stats_.seconds_per_block;
    smoothed = smoothed > 0.0 ? 0.8 * smoothed + 0.2 * per_block : per_block;
  }
  if (options_.step_observer != nullptr) options_.step_observer->OnPeerPull(seconds);
  if (!pulled.status.ok() || committed < static_cast<int64_t>(pulled.blocks.size())) {
    ++kv_peer_stats_.pulls_failed;
    std::string reason = pulled.status.ok() ? "cache_full" : absl::StatusCodeToString(pulled.status.code());
    absl::AsciiStrToLower(&reason);
    ++kv_peer_stats_.failed_by_reason[reason];
  } else if (committed < pulled.asked) {
    ++kv_peer_stats_.pulls_partial;
  } else {
    ++kv_peer_stats_.pulls_done;
  }
}

std::vector<KvBlockBytes> Engine::CopyOutForPeer(const std::vector<BlockHash>& hashes) {
  const int64_t block_bytes = executor_.info().kv_block_bytes;
  std::vector<KvBlockBytes> out;
  if (block_bytes <= 0) return out;  // a cache that cannot be copied
  for (const BlockHash& hash : hashes) {
    KvBlockBytes b{.hash = hash, .bytes = std::vector<uint8_t>(static_cast<size_t>(block_bytes))};
    if (const std::optional<BlockId> block = pool_.FindCached(hash)) {
      if (!executor_.CopyKvBlockOut(*block, b.bytes).ok()) break;
      b.parent = pool_.parent_of(*block);
      b.published = pool_.published(*block);
    } else if (options_.kv_tiers == nullptr ||
               !options_.kv_tiers->CopyFromHost(hash, b.bytes, &b.parent, &b.published)) {
      break;
    }
    out.push_back(std::move(b));
  }
  return out;
}

void Engine::HoldForHandoff(const Request& req) {
  if (req.params.kv_lease_id.empty()) return;
  const std::vector<BlockHash> pages = kv_.PagesOfHit(req.prompt_block_hashes);
  const int32_t held =
      kv_leases_.Hold(req.params.kv_lease_id, pages, std::chrono::steady_clock::now() + options_.kv_lease_duration);
  DropStagedWithoutLease();  // a lease the bound displaced
  const int64_t bytes = int64_t{held} * executor_.info().kv_block_bytes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (held == 0 || staged_bytes_ + bytes > options_.kv_lease_staging_bytes) return;
  }
  // Copied now, on the engine thread, while the blocks are certainly held.
  std::vector<KvBlockBytes> out = CopyOutForPeer(std::vector<BlockHash>(pages.begin(), pages.begin() + held));
  int64_t copied = 0;
  for (const KvBlockBytes& b : out) copied += static_cast<int64_t>(b.bytes.size());
  std::lock_guard<std::mutex> lock(mu_);
  staged_bytes_ += copied;
  staged_[req.params.kv_lease_id] = std::move(out);
}

std::optional<std::vector<KvBlockBytes>> Engine::TakeStaged(const std::string& lease_id,
                                                            const std::vector<BlockHash>& hashes) {
  std::vector<KvBlockBytes> staged;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = staged_.find(lease_id);
    if (it == staged_.end()) return std::nullopt;
    staged = std::move(it->second);
    staged_.erase(it);
    for (const KvBlockBytes& b : staged) staged_bytes_ -= static_cast<int64_t>(b.bytes.size());
  }
  // The asked blocks in the asked order (the puller skips those it holds).
  absl::flat_hash_map<BlockHash, size_t> index;
  for (size_t i = 0; i < staged.size(); ++i) index[staged[i].hash] = i;
  std::vector<KvBlockBytes> out;
  int64_t bytes = 0;
  for (const BlockHash& h : hashes) {
    const auto found = index.find(h);
    if (found == index.end()) break;
    bytes += static_cast<int64_t>(staged[found->second].bytes.size());
    out.push_back(std::move(staged[found->second]));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.staged_served.push_back({.lease_id = lease_id, .blocks = static_cast<int64_t>(out.size()), .bytes = bytes});
  }
  wake_.notify_one();
  return out;
}

void Engine::DropStagedWithoutLease() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = staged_.begin(); it != staged_.end();) {
    auto next = std::next(it);
    if (!kv_leases_.Holds(it->first)) {
      for (const KvBlockBytes& b : it->second) staged_bytes_ -= static_cast<int64_t>(b.bytes.size());
      staged_.erase(it);
    }
    it = next;
  }
}

void Engine::ServeExport(const std::vector<BlockHash>& hashes, KvExportDone done, const std::string& lease_id) {
  std::vector<KvBlockBytes> out = CopyOutForPeer(hashes);
  // Copied: the reader has what it came for (or as much as it will get).
  if (!lease_id.empty()) kv_leases_.Release(lease_id);
  KvTierManager* tiers = options_.kv_tiers;
  std::vector<BlockHash> on_disk;
  for (size_t i = out.size(); tiers != nullptr && i < hashes.size() && tiers->OnDiskOnly(hashes[i]); ++i) {
    on_disk.push_back(hashes[i]);
  }
  if (on_disk.empty()) {
    CountServed(out);
    done(std::move(out));
    return;
  }
  // Read by the disk tier's thread while the engine steps; handed over at
  // the Poll that finds it done, on this thread.
  tiers->ReadForPeer(std::move(on_disk),
                     [this, out = std::move(out), done = std::move(done)](
                         std::vector<DiskKvTier::Entry> entries, std::vector<std::vector<uint8_t>> blocks) mutable {
                       const size_t block_bytes = static_cast<size_t>(executor_.info().kv_block_bytes);
                       for (size_t i = 0; i < blocks.size() && blocks[i].size() == block_bytes; ++i) {
                         out.push_back({.hash = entries[i].hash,
                                        .parent = entries[i].parent,
                                        .published = entries[i].published,
                                        .bytes = std::move(blocks[i])});
                       }
                       CountServed(out);
                       done(std::move(out));
                     });
}

void Engine::CountServed(const std::vector<KvBlockBytes>& blocks) {
  ++kv_peer_stats_.pulls_served;
  kv_peer_stats_.blocks_served += static_cast<int64_t>(blocks.size());
  for (const KvBlockBytes& b : blocks) kv_peer_stats_.bytes_served += static_cast<int64_t>(b.bytes.size());
}

}  // namespace kvfleet::engine
