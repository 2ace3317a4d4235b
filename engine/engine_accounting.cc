// The engine's accounting, away from its step: the block audit for tests,
// the stats snapshot each step publishes, the prefill rate the router
// prices by, and the thread-safe readers of both.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"

namespace kvfleet::engine {

absl::Status Engine::AuditBlocks() const {
  const BlockPoolStats counted = pool_.Stats(), recounted = pool_.Recount();
  if (counted.used != recounted.used || counted.cached != recounted.cached || counted.empty != recounted.empty) {
    return absl::InternalError(absl::StrCat("pool counters say used/cached/empty ", counted.used, "/", counted.cached,
                                            "/", counted.empty, ", a recount ", recounted.used, "/", recounted.cached,
                                            "/", recounted.empty));
  }
  std::vector<int32_t> refs(static_cast<size_t>(pool_.num_blocks()), 0);
  for (const auto& [id, req] : requests_) {
    if (kv_.HeldBlocks(*req) > kv_.BlocksFor(req->num_tokens())) {
      return absl::InternalError(absl::StrCat("request ", id.value(), " holds ", kv_.HeldBlocks(*req), " blocks for ",
                                              req->num_tokens(), " tokens"));
    }
    for (BlockId b : req->block_table) {
      if (b != KvCacheManager::kFreedPage) ++refs[static_cast<size_t>(b.value())];
    }
  }
  if (options_.kv_tiers != nullptr) {
    for (BlockId b : options_.kv_tiers->BlocksInFlight()) ++refs[static_cast<size_t>(b.value())];
  }
  kv_leases_.CountReferences(refs);
  for (int32_t b = 0; b < pool_.num_blocks(); ++b) {
    if (refs[static_cast<size_t>(b)] != pool_.ref_count(BlockId(b))) {
      return absl::InternalError(absl::StrCat("block ", b, " has reference count ", pool_.ref_count(BlockId(b)),
                                              " but ", refs[static_cast<size_t>(b)], " block tables name it"));
    }
  }
  return absl::OkStatus();
}

Usage Engine::UsageSoFar(const Request& req) {
  return {.prompt_tokens = req.num_prompt_tokens(),
          .cached_prompt_tokens = std::max(0, req.cached_prompt_tokens),
          .generated_tokens = req.num_output_tokens() - static_cast<int32_t>(req.params.resumed_output.size())};
}

void Engine::PublishStats(int64_t last_step_tokens) {
  EngineStats s;
  s.last_step_tokens = last_step_tokens;
  s.running = scheduler_.num_running();
  s.waiting = scheduler_.num_waiting();
  const BlockPoolStats pool = pool_.Stats();
  s.blocks_total = pool.total;
  s.blocks_used = pool.used;
  s.blocks_cached = pool.cached;
  s.blocks_free = pool.free();
  s.prefix_queried_tokens = kv_.counters().queried_tokens;
  s.prefix_hit_tokens = kv_.counters().hit_tokens;
  s.preemptions = scheduler_.num_preemptions();
  s.steps = steps_;
  s.speculation = speculator_.Stats();
  s.pending_prefill_tokens = pending_prefill_.tokens();
  s.prefill_tokens_per_second = prefill_tokens_per_second_;
  s.mask_wait_seconds = mask_wait_seconds_;
  if (lora_ != nullptr) {
    s.lora = lora_->stats();
    s.resident_lora = lora_->resident();
  }
  s.kv_peer = kv_peer_stats_;
  s.kv_block_bytes = executor_.info().kv_block_bytes;
  s.kv_leases = kv_leases_.size();
  s.kv_leased_blocks = kv_leases_.leased_blocks();
  s.kv_lease_counters = kv_leases_.counters();
  if (options_.kv_tiers != nullptr) {
    const KvTierStats t = options_.kv_tiers->stats();
    const auto per_block = [](const KvTierCounters& c) {
      return c.hit_blocks > 0 ? c.load_seconds / static_cast<double>(c.hit_blocks) : c.startup_seconds_per_block;
    };
    s.host_load_seconds_per_block = per_block(t.host);
    s.disk_load_seconds_per_block = per_block(t.disk);
  }
  int64_t allocated = 0, filled = 0;
  for (const Request* r : scheduler_.running()) {
    allocated += static_cast<int64_t>(kv_.HeldBlocks(*r)) * kv_.block_size();
    filled += r->num_computed_tokens;
  }
  s.kv_waste = allocated > 0 ? 1.0 - static_cast<double>(filled) / static_cast<double>(allocated) : 0.0;
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = s;
  drained_requests_ = 0;
  drained_pending_tokens_ = 0;
  last_progress_ = std::chrono::steady_clock::now();
}

void Engine::ObservePrefillRate(const SchedulerOutput& scheduled, double seconds) {
  bool prefilled = false;
  for (const ScheduledChunk& c : scheduled.chunks) prefilled = prefilled || c.num_tokens - c.num_draft_tokens > 1;
  if (!prefilled || seconds <= 0) return;
  const double rate = static_cast<double>(scheduled.num_tokens) / seconds;
  // Smoothed over about five prefill steps: one slow step (a page fault, a
  // busy neighbour) must not make the router forget its decisions early.
  constexpr double kWeight = 0.2;
  prefill_tokens_per_second_ =
      prefill_tokens_per_second_ == 0.0 ? rate : (1 - kWeight) * prefill_tokens_per_second_ + kWeight * rate;
}

EngineStats Engine::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineStats s = stats_;
  s.waiting += static_cast<int32_t>(inbox_.submitted.size()) + drained_requests_;
  s.pending_prefill_tokens += inbox_pending_tokens_ + drained_pending_tokens_;
  return s;
}

EngineHeartbeat Engine::Heartbeat() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {.in_flight = static_cast<int64_t>(active_ids_.size()), .last_progress = last_progress_};
}

}  // namespace kvfleet::engine
