// ScoreCandidate: each term of the cost on hand-computed examples.
#include "services/router/placement/cost_model.h"

#include <gtest/gtest.h>

#include "tests/unit/services/router/placement/placement_test_util.h"

namespace kvfleet::router {
namespace {

using testing::Busy;
using testing::MakeRequest;
using testing::Tokens;
using testing::WithMatch;

constexpr int32_t kBs = 16;

TEST(CostModelTest, TermsOnAHandExample) {
  // 12 full blocks + 8 tokens: 13 prompt blocks, 200 tokens.
  const PlacementRequest r = MakeRequest(Tokens(1, 12, kBs, 8), kBs);
  WorkerCandidate c = WithMatch(Busy("w", /*running=*/3, /*used=*/40, /*total=*/100), 10);
  c.load.waiting = 2;
  c.load.pending_prefill_tokens = 64;
  const CandidateScore s = ScoreCandidate(PlacementOptions{}, r, c, /*remembered_blocks=*/0, {});
  EXPECT_EQ(s.reported_blocks, 10);
  EXPECT_EQ(s.remembered_blocks, 0);
  EXPECT_EQ(s.matched_blocks, 10);
  EXPECT_EQ(s.new_blocks, 3);
  EXPECT_DOUBLE_EQ(s.uncached_prefill_blocks, (200.0 - 160.0 + 64.0) / 16.0);  // 6.5
  EXPECT_DOUBLE_EQ(s.decode_load_blocks, 43.0);
  EXPECT_DOUBLE_EQ(s.kv_penalty, 0.0);
  EXPECT_DOUBLE_EQ(s.cost, 6.5 + 0.5 * 43.0);  // prefill_weight 1, decode_weight 0.5
  EXPECT_EQ(s.load, 5);
  EXPECT_EQ(s.used_blocks, 40);
  EXPECT_TRUE(s.fits);
  EXPECT_FALSE(s.saturated);

  const PlacementOptions weighted{.prefill_weight = 2.0, .decode_weight = 0.5};
  EXPECT_DOUBLE_EQ(ScoreCandidate(weighted, r, c, 0, {}).cost, 2.0 * 6.5 + 0.5 * 43.0);
}

TEST(CostModelTest, RememberedBlocksCountWhenAheadOfTheIndex) {
  const PlacementRequest r = MakeRequest(Tokens(1, 8, kBs), kBs);
  const WorkerCandidate c = WithMatch(Busy("w", 0, 0), 2);
  const CandidateScore s = ScoreCandidate(PlacementOptions{}, r, c, /*remembered_blocks=*/8, {});
  EXPECT_EQ(s.matched_blocks, 8);
  EXPECT_EQ(s.new_blocks, 0);
  EXPECT_DOUBLE_EQ(s.uncached_prefill_blocks, 0.0);
  // Clamped to the prompt's hashes, both sources.
  const CandidateScore t = ScoreCandidate(PlacementOptions{}, r, WithMatch(c, 50), 99, {});
  EXPECT_EQ(t.reported_blocks, 8);
  EXPECT_EQ(t.remembered_blocks, 8);
}

TEST(CostModelTest, InFlightDecisionsAddLoadAndBlocks) {
  const PlacementRequest r = MakeRequest(Tokens(1, 4, kBs), kBs);
  const WorkerCandidate c = Busy("w", /*running=*/1, /*used=*/10, /*total=*/100);
  const CandidateScore s = ScoreCandidate(PlacementOptions{}, r, c, 0, {.requests = 2, .blocks = 30});
  EXPECT_EQ(s.load, 3);
  EXPECT_EQ(s.used_blocks, 40);
  EXPECT_DOUBLE_EQ(s.decode_load_blocks, 44.0);
  // Free blocks: 90 reported, 30 of them already promised.
  const CandidateScore full = ScoreCandidate(PlacementOptions{}, r, c, 0, {.requests = 2, .blocks = 87});
  EXPECT_FALSE(full.fits);
}

TEST(CostModelTest, KvPressurePenaltyAboveTheThreshold) {
  const PlacementRequest r = MakeRequest(Tokens(1, 10, kBs), kBs);
  // 85 used + 10 new = 95 of 100: 5 blocks over the 90% threshold.
  const CandidateScore s = ScoreCandidate(PlacementOptions{}, r, Busy("w", 4, 85, 100), 0, {});
  EXPECT_DOUBLE_EQ(s.kv_penalty, 4.0 * 5.0);
  EXPECT_DOUBLE_EQ(s.cost, 10.0 + 0.5 * 95.0 + 20.0);
  EXPECT_TRUE(s.fits);
  // Exactly at the threshold: no penalty.
  EXPECT_DOUBLE_EQ(ScoreCandidate(PlacementOptions{}, r, Busy("w", 4, 80, 100), 0, {}).kv_penalty, 0.0);
  // 95 used, 5 free: the 10 new blocks do not fit.
  EXPECT_FALSE(ScoreCandidate(PlacementOptions{}, r, Busy("w", 4, 95, 100), 0, {}).fits);
  // Unknown capacity (no load report yet): no penalty, assumed to fit.
  const CandidateScore unknown = ScoreCandidate(PlacementOptions{}, r, WorkerCandidate{.worker_id = "w"}, 0, {});
  EXPECT_DOUBLE_EQ(unknown.kv_penalty, 0.0);
  EXPECT_TRUE(unknown.fits);
}

TEST(CostModelTest, SaturatedWhenTheBatchIsFull) {
  const PlacementRequest r = MakeRequest(Tokens(1, 2, kBs), kBs);
  WorkerCandidate c = Busy("w", /*running=*/6, 10);
  c.max_num_seqs = 8;
  EXPECT_FALSE(ScoreCandidate(PlacementOptions{}, r, c, 0, {}).saturated);
  EXPECT_TRUE(ScoreCandidate(PlacementOptions{}, r, c, 0, {.requests = 2, .blocks = 2}).saturated);
  c.max_num_seqs = 0;  // unknown: never saturated
  EXPECT_FALSE(ScoreCandidate(PlacementOptions{}, r, c, 0, {.requests = 100, .blocks = 2}).saturated);
}

TEST(CostModelTest, NegativeReportsCountAsZero) {
  const PlacementRequest r = MakeRequest(Tokens(1, 2, kBs), kBs);
  WorkerCandidate c{.worker_id = "w",
                    .matched_blocks = -3,
                    .load = {.running = -1,
                             .waiting = -2,
                             .blocks_used = -5,
                             .blocks_free = 100,
                             .blocks_total = 100,
                             .pending_prefill_tokens = -7}};
  const CandidateScore s = ScoreCandidate(PlacementOptions{}, r, c, 0, {});
  EXPECT_EQ(s.matched_blocks, 0);
  EXPECT_EQ(s.load, 0);
  EXPECT_EQ(s.used_blocks, 0);
  EXPECT_DOUBLE_EQ(s.uncached_prefill_blocks, 2.0);
}

// Matched blocks below the device are priced at the worker's measured
// load time per block over its prefill time per block: nearly free from
// host memory, dearer from disk, a recompute until measured.
TEST(CostModelTest, LowerTierHitsCostTheirMeasuredLoadTime) {
  const PlacementRequest r = MakeRequest(Tokens(1, 10, kBs), kBs);  // 10 blocks
  WorkerCandidate device{.worker_id = "device",
                         .matched_blocks = 8,
                         .load = {.blocks_free = 100, .blocks_total = 100, .prefill_tokens_per_second = 1000}};
  WorkerCandidate host = device;
  host.worker_id = "host";
  host.host_blocks = 4;
  host.load.host_load_seconds_per_block = 0.1 * kBs / 1000.0;  // a tenth of a block's prefill
  WorkerCandidate disk = device;
  disk.worker_id = "disk";
  disk.disk_blocks = 8;
  disk.load.disk_load_seconds_per_block = 0.5 * kBs / 1000.0;
  WorkerCandidate unmeasured = device;
  unmeasured.host_blocks = 8;
  const PlacementOptions o;
  const CandidateScore d = ScoreCandidate(o, r, device, 0, {});
  const CandidateScore h = ScoreCandidate(o, r, host, 0, {});
  const CandidateScore k = ScoreCandidate(o, r, disk, 0, {});
  const CandidateScore u = ScoreCandidate(o, r, unmeasured, 0, {});
  EXPECT_DOUBLE_EQ(h.lower_tier_blocks, 4 * 0.1);
  EXPECT_DOUBLE_EQ(h.uncached_prefill_blocks, d.uncached_prefill_blocks + 0.4);
  EXPECT_DOUBLE_EQ(k.lower_tier_blocks, 8 * 0.5);
  EXPECT_DOUBLE_EQ(u.lower_tier_blocks, 8.0) << "unmeasured: priced as recomputing";
  EXPECT_LT(d.cost, h.cost);
  EXPECT_LT(h.cost, k.cost);
  EXPECT_LT(k.cost, u.cost);
  // A load measured slower than recomputing costs no more than recomputing.
  disk.load.disk_load_seconds_per_block = 10.0;
  EXPECT_DOUBLE_EQ(ScoreCandidate(o, r, disk, 0, {}).lower_tier_blocks, 8.0);
  // Recently sent there by this router: those blocks are on its device.
  EXPECT_DOUBLE_EQ(ScoreCandidate(o, r, host, 9, {}).lower_tier_blocks, 0.0);
}

TEST(CostModelTest, ALoraAdapterNotInTheSlotsCostsItsMeasuredLoadInPrefillBlocks) {
  const PlacementRequest r = MakeRequest(Tokens(1, 4, kBs), kBs);
  WorkerCandidate resident = Busy("w", 0, 0, 100);
  resident.load.prefill_tokens_per_second = 1600.0;  // a block in 10 ms
  const double base = ScoreCandidate(PlacementOptions{}, r, resident, 0, {}).cost;
  WorkerCandidate cold = resident;
  cold.lora_resident = false;
  cold.lora_load_seconds = 0.05;  // measured: 5 blocks' prefill
  const CandidateScore s = ScoreCandidate(PlacementOptions{}, r, cold, 0, {});
  EXPECT_DOUBLE_EQ(s.lora_load_blocks, 5.0);
  EXPECT_DOUBLE_EQ(s.cost, base + 5.0);
  // Before its first load: the assumed time; before any prefill: one block.
  cold.lora_load_seconds = 0.0;
  EXPECT_DOUBLE_EQ(ScoreCandidate(PlacementOptions{.lora_load_assumed_seconds = 0.02}, r, cold, 0, {}).lora_load_blocks,
                   2.0);
  cold.load.prefill_tokens_per_second = 0.0;
  EXPECT_DOUBLE_EQ(ScoreCandidate(PlacementOptions{}, r, cold, 0, {}).lora_load_blocks, 1.0);
}

}  // namespace
}  // namespace kvfleet::router
