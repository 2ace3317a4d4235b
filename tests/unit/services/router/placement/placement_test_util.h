// Helpers for the placement tests: a fake clock, prompts hashed with the
// real chained block hash, and worker candidates built field by field.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/block_hash.h"
#include "services/router/placement/placement.h"

namespace kvfleet::router::testing {

class FakeClock {
 public:
  using Clock = std::chrono::steady_clock;
  Clock::time_point Now() const { return now_; }
  void Advance(Clock::duration d) { now_ += d; }
  Placement::NowFn Fn() {
    return [this] { return now_; };
  }

 private:
  Clock::time_point now_ = Clock::time_point() + std::chrono::hours(1);
};

// `blocks` full blocks of tokens drawn from `seed` (the same seed, the same
// tokens), then `extra_tokens` more.
inline std::vector<int32_t> Tokens(int32_t seed, int32_t blocks, int32_t block_size, int32_t extra_tokens = 0) {
  std::vector<int32_t> t;
  // Unsigned, so a large seed wraps instead of overflowing (UBSan).
  for (int32_t i = 0; i < blocks * block_size + extra_tokens; ++i) {
    t.push_back(static_cast<int32_t>(static_cast<uint32_t>(seed) * 100003u + static_cast<uint32_t>(i)));
  }
  return t;
}

inline PlacementRequest MakeRequest(const std::vector<int32_t>& tokens, int32_t block_size) {
  static const BlockHash root = RootBlockHash("placement-test-model", "");
  return {.block_hashes = HashFullBlocks(root, tokens, block_size),
          .prompt_tokens = static_cast<int32_t>(tokens.size()),
          .block_size = block_size};
}

inline std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// An idle worker with `total` blocks, all free.
inline WorkerCandidate Idle(const std::string& id, int32_t total = 1000) {
  return {.worker_id = id, .endpoint = id + ":50051", .load = {.blocks_free = total, .blocks_total = total}};
}

// A worker with `used` of `total` blocks held by `running` requests.
inline WorkerCandidate Busy(const std::string& id, int32_t running, int32_t used, int32_t total = 1000) {
  WorkerCandidate c = Idle(id, total);
  c.load.running = running;
  c.load.blocks_used = used;
  c.load.blocks_free = total - used;
  return c;
}

inline WorkerCandidate WithMatch(WorkerCandidate c, int32_t matched) {
  c.matched_blocks = matched;
  return c;
}

inline const CandidateScore& ScoreOf(const Decision& d, const std::string& id) {
  for (const CandidateScore& s : d.scores) {
    if (s.worker_id == id) return s;
  }
  static const CandidateScore none;
  return none;
}

}  // namespace kvfleet::router::testing
