#include "services/router/placement/cost_model.h"

#include <algorithm>

namespace kvfleet::router {

namespace {

// A block's copy time in blocks of prefill at `prefill_tokens_per_second`.
double InPrefillBlocks(double seconds_per_block, double prefill_tokens_per_second, int64_t block_size) {
  return seconds_per_block * prefill_tokens_per_second / static_cast<double>(block_size);
}

}  // namespace

double LowerTierBlockCost(double load_seconds_per_block, const WorkerLoad& load, int64_t block_size) {
  // Unmeasured: priced as a recompute until the worker has loaded a block.
  if (!(load_seconds_per_block > 0.0) || !(load.prefill_tokens_per_second > 0.0)) return 1.0;
  return std::min(1.0, InPrefillBlocks(load_seconds_per_block, load.prefill_tokens_per_second, block_size));
}

double PeerPullBlockCost(const PlacementOptions& options, const WorkerLoad& load, int64_t block_size,
                         double fallback_prefill_rate) {
  const double rate = load.prefill_tokens_per_second > 0.0 ? load.prefill_tokens_per_second : fallback_prefill_rate;
  if (!(rate > 0.0)) return 1.0;
  double pull_seconds = load.peer_pull_seconds_per_block;
  if (!(pull_seconds > 0.0)) {
    if (load.kv_block_bytes <= 0) return 1.0;
    pull_seconds = static_cast<double>(load.kv_block_bytes) / options.peer_pull_assumed_bytes_per_second;
  }
  return InPrefillBlocks(pull_seconds, rate, block_size);
}

double HandoffPullBlockCost(const PlacementOptions& options, const WorkerLoad& load, int64_t block_size,
                            double fallback_prefill_rate) {
  const double rate = load.prefill_tokens_per_second > 0.0 ? load.prefill_tokens_per_second : fallback_prefill_rate;
  if (!(rate > 0.0) || load.kv_block_bytes <= 0) return 0.0;
  return InPrefillBlocks(static_cast<double>(load.kv_block_bytes) / options.peer_pull_assumed_bytes_per_second, rate,
                         block_size);
}

CandidateScore ScoreCandidate(const PlacementOptions& options, const PlacementRequest& request,
                              const WorkerCandidate& c, int32_t remembered_blocks, DecisionMemory::InFlight in_flight,
                              const PeerSource* source) {
  const int32_t hashes = static_cast<int32_t>(request.block_hashes.size());
  const int64_t block_size = request.block_size;
  const int64_t prompt_tokens = request.prompt_tokens;
  CandidateScore s;
  s.worker_id = c.worker_id;
  s.reported_blocks = std::clamp(c.matched_blocks, 0, hashes);
  s.remembered_blocks = std::clamp(remembered_blocks, 0, hashes);
  s.matched_blocks = std::max(s.reported_blocks, s.remembered_blocks);
  const int64_t prompt_blocks = (prompt_tokens + block_size - 1) / block_size;
  s.new_blocks = static_cast<int32_t>(prompt_blocks - s.matched_blocks);

  const int64_t uncached_tokens = prompt_tokens - s.matched_blocks * block_size;
  s.uncached_prefill_blocks =
      static_cast<double>(uncached_tokens + std::max<int64_t>(c.load.pending_prefill_tokens, 0)) /
      static_cast<double>(block_size);
  // Blocks below the device are not free: each costs its measured load time
  // in prefill blocks. Remembered blocks past the report are on the device.
  if (s.reported_blocks >= s.remembered_blocks) {
    const int32_t host = std::clamp(c.host_blocks, 0, s.reported_blocks);
    const int32_t disk = std::clamp(c.disk_blocks, 0, s.reported_blocks - host);
    s.lower_tier_blocks = host * LowerTierBlockCost(c.load.host_load_seconds_per_block, c.load, block_size) +
                          disk * LowerTierBlockCost(c.load.disk_load_seconds_per_block, c.load, block_size);
    s.uncached_prefill_blocks += s.lower_tier_blocks;
  }
  // An adapter not in its device slots is loaded first: its measured time, in prefill blocks.
  if (!c.lora_resident) {
    const double seconds = c.lora_load_seconds > 0.0 ? c.lora_load_seconds : options.lora_load_assumed_seconds;
    s.lora_load_blocks = c.load.prefill_tokens_per_second > 0.0
                             ? InPrefillBlocks(seconds, c.load.prefill_tokens_per_second, block_size)
                             : 1.0;  // a block's worth until the worker's prefill rate is known
    s.uncached_prefill_blocks += s.lora_load_blocks;
  }
  const double uncached_computing = s.uncached_prefill_blocks;
  if (source != nullptr && source->worker_id != c.worker_id) {
    // The last prompt token is always computed, so no hit covers a block
    // that ends the prompt: the worker does not pull it.
    const int64_t reachable = std::max<int64_t>(prompt_tokens - 1, 0) / block_size;
    const int32_t peer =
        static_cast<int32_t>(std::min<int64_t>(std::clamp(source->blocks, 0, hashes), reachable)) - s.matched_blocks;
    const double per_block = peer <= 0 ? 1.0
                             : source->handoff
                                 ? HandoffPullBlockCost(options, c.load, block_size, source->prefill_tokens_per_second)
                                 : PeerPullBlockCost(options, c.load, block_size, source->prefill_tokens_per_second);
    s.pull_priced_out = peer > 0 && per_block >= 1.0;
    if (per_block < 1.0) {
      s.peer_blocks = peer;
      s.pull_blocks = peer * per_block;
      s.uncached_prefill_blocks += s.pull_blocks - peer;
    }
  }

  s.used_blocks = std::max(c.load.blocks_used, 0) + in_flight.blocks;
  s.decode_load_blocks = static_cast<double>(s.used_blocks + s.new_blocks);
  if (c.load.blocks_total > 0) {
    const double over = s.decode_load_blocks - options.kv_pressure_threshold * c.load.blocks_total;
    s.kv_penalty = options.kv_pressure_weight * std::max(over, 0.0);
    const int64_t free_blocks = std::max(c.load.blocks_free, 0) - in_flight.blocks;
    s.fits = s.new_blocks <= free_blocks;
  }
  s.cost =
      options.prefill_weight * s.uncached_prefill_blocks + options.decode_weight * s.decode_load_blocks + s.kv_penalty;
  s.cost_computing =
      options.prefill_weight * uncached_computing + options.decode_weight * s.decode_load_blocks + s.kv_penalty;

  s.load = std::max(c.load.running, 0) + std::max(c.load.waiting, 0) + in_flight.requests;
  s.saturated = c.max_num_seqs > 0 && s.load >= c.max_num_seqs;
  return s;
}

}  // namespace kvfleet::router
