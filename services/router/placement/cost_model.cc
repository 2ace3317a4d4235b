#include "services/router/placement/cost_model.h"

#include <algorithm>

namespace kvfleet::router {

CandidateScore ScoreCandidate(const PlacementOptions& options, const PlacementRequest& request,
                              const WorkerCandidate& c, int32_t remembered_blocks, DecisionMemory::InFlight in_flight) {
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
  s.uncached_prefill_blocks = static_cast<double>(uncached_tokens + std::max<int64_t>(c.pending_prefill_tokens, 0)) /
                              static_cast<double>(block_size);

  s.used_blocks = std::max(c.blocks_used, 0) + in_flight.blocks;
  s.decode_load_blocks = static_cast<double>(s.used_blocks + s.new_blocks);
  if (c.blocks_total > 0) {
    const double over = s.decode_load_blocks - options.kv_pressure_threshold * c.blocks_total;
    s.kv_penalty = options.kv_pressure_weight * std::max(over, 0.0);
    const int64_t free_blocks = std::max(c.blocks_free, 0) - in_flight.blocks;
    s.fits = s.new_blocks <= free_blocks;
  }
  s.cost =
      options.prefill_weight * s.uncached_prefill_blocks + options.decode_weight * s.decode_load_blocks + s.kv_penalty;

  s.load = std::max(c.running, 0) + std::max(c.waiting, 0) + in_flight.requests;
  s.saturated = c.max_num_seqs > 0 && s.load >= c.max_num_seqs;
  return s;
}

}  // namespace kvfleet::router
