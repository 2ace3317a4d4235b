// Disaggregated prefill and decode in the engine: a prefill_only request
// computes its prompt and first token, hands off and leases its blocks; a
// second engine continues from that token, pulling the blocks under the
// lease, and the tokens are those of one engine doing everything (greedy
// and seeded). Runs on every backend suite (the CUDA emulation too).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "engine/engine.h"
#include "tests/testing/collecting_sink.h"
#include "tests/testing/test_executor.h"
#include "tests/unit/engine/engine_peer_fetcher.h"
#include "tests/unit/engine/tiny_model_suite.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {
namespace {

using ::kvfleet::testing::CollectingSink;
using ::kvfleet::testing::EngineFetcher;

constexpr int32_t kBlockSize = 4;
constexpr int kPromptTokens = 43;  // ten full blocks and a partial one

class EngineHandoffTest : public TinyModelSuite {
 protected:
  static void SetUpTestSuite() { LoadTinyModel({.dtype = DType::kQ8_0, .seed = 29}); }

  static EngineRequest Prompt(bool seeded, int32_t max_tokens = 8) {
    EngineRequest r{.id = RequestId(1)};
    for (int i = 0; i < kPromptTokens; ++i) r.prompt.push_back(static_cast<model::TokenId>((i * 11 + 5) % 280));
    r.stopping = {.max_tokens = max_tokens, .ignore_eos = true};
    r.sampling =
        seeded ? SamplingParams{.temperature = 0.9f, .top_k = 40, .seed = 77} : SamplingParams{.temperature = 0.0f};
    return r;
  }

  // The prefill half of a split: prefill only, its blocks leased as `lease`.
  static EngineRequest PrefillOnly(const std::string& lease, int32_t max_tokens = 8) {
    EngineRequest r = Prompt(false, max_tokens);
    r.prefill_only = true;
    r.kv_lease_id = lease;
    return r;
  }

  // The decode half: the prompt and the handed-off token, its blocks pulled
  // from the prefill worker under `lease`.
  static EngineRequest DecodeHalf(bool seeded, std::vector<model::TokenId> first, const std::string& lease) {
    EngineRequest r = Prompt(seeded);
    r.resumed_output = std::move(first);
    r.kv_peer = KvPeerSource{.endpoint = "prefill-0:7002", .blocks = kPromptTokens / kBlockSize, .lease_id = lease};
    return r;
  }

  static EngineOptions Options() {
    return {.model_id = "tiny", .scheduler = {.max_num_batched_tokens = 64, .max_num_seqs = 4}};
  }

  static void RunToEnd(Engine& engine) {
    int steps = 0;
    while (engine.HasWork() && ++steps < 10000) {
      ASSERT_TRUE(engine.Step().ok());
      ASSERT_TRUE(engine.AuditBlocks().ok()) << engine.AuditBlocks();
    }
  }
};

TEST_F(EngineHandoffTest, APrefillHandoffThenAPullGivesTheTokensOfOneEngine) {
  for (const bool seeded : {false, true}) {
    SCOPED_TRACE(seeded ? "seeded" : "greedy");
    std::vector<model::TokenId> alone;
    {
      auto executor = testing::NewTinyExecutor(*model_, 64, kBlockSize, 2);
      Engine engine(*executor, Options());
      CollectingSink sink;
      ASSERT_TRUE(engine.Submit(Prompt(seeded), &sink).ok());
      RunToEnd(engine);
      alone = sink.tokens();
      ASSERT_EQ(alone.size(), 8u);
    }
    auto prefill_executor = testing::NewTinyExecutor(*model_, 64, kBlockSize, 2);
    Engine prefill(*prefill_executor, Options());
    EngineRequest first = Prompt(seeded);
    first.prefill_only = true;
    first.kv_lease_id = "lease-1";
    CollectingSink handed;
    ASSERT_TRUE(prefill.Submit(first, &handed).ok());
    RunToEnd(prefill);
    ASSERT_TRUE(handed.finished());
    EXPECT_EQ(handed.reason(), FinishReason::kHandoff);
    ASSERT_EQ(handed.tokens().size(), 1u);
    EXPECT_EQ(handed.tokens()[0], alone[0]);
    EXPECT_EQ(prefill.Stats().kv_leases, 1);
    EXPECT_EQ(prefill.Stats().kv_leased_blocks, kPromptTokens / kBlockSize);
    EXPECT_EQ(prefill.Stats().blocks_used, kPromptTokens / kBlockSize) << "the lease holds them; nothing else does";

    EngineFetcher fetcher(prefill);
    auto decode_executor = testing::NewTinyExecutor(*model_, 64, kBlockSize, 2);
    EngineOptions decode_options = Options();
    decode_options.kv_peer_fetcher = &fetcher;
    Engine decode(*decode_executor, decode_options);
    const EngineRequest rest = DecodeHalf(seeded, handed.tokens(), "lease-1");
    CollectingSink continued;
    ASSERT_TRUE(decode.Submit(rest, &continued).ok());
    EXPECT_EQ(fetcher.asked.size(), 1u) << "a split request's pull starts when it arrives, before any step";
    RunToEnd(decode);
    ASSERT_TRUE(continued.finished());
    std::vector<model::TokenId> split = handed.tokens();
    for (model::TokenId t : continued.tokens()) split.push_back(t);
    EXPECT_EQ(split, alone);
    ASSERT_EQ(fetcher.leases.size(), 1u);
    EXPECT_EQ(fetcher.leases[0], "lease-1");
    EXPECT_EQ(decode.Stats().kv_peer.blocks_pulled, kPromptTokens / kBlockSize);
    EXPECT_EQ(continued.usage().cached_prompt_tokens, kPromptTokens / kBlockSize * kBlockSize);
    // The pull released the lease: the blocks are ordinary cache again.
    EXPECT_EQ(prefill.Stats().kv_leases, 0);
    EXPECT_EQ(prefill.Stats().kv_lease_counters.released, 1);
    EXPECT_EQ(prefill.Stats().blocks_used, 0);
    EXPECT_TRUE(prefill.AuditBlocks().ok());
  }
}

TEST_F(EngineHandoffTest, ASplitRequestThatMustQueuePullsAtAdmission) {
  auto prefill_executor = testing::NewTinyExecutor(*model_, 64, kBlockSize, 2);
  Engine prefill(*prefill_executor, Options());
  CollectingSink handed;
  ASSERT_TRUE(prefill.Submit(PrefillOnly("lease-q"), &handed).ok());
  RunToEnd(prefill);
  ASSERT_EQ(handed.reason(), FinishReason::kHandoff);

  EngineFetcher fetcher(prefill);
  auto decode_executor = testing::NewTinyExecutor(*model_, 64, kBlockSize, 2);
  EngineOptions decode_options = Options();
  decode_options.scheduler.max_num_seqs = 1;
  decode_options.kv_peer_fetcher = &fetcher;
  decode_options.kv_lease_duration = std::chrono::milliseconds(0);  // renewals due every step
  Engine decode(*decode_executor, decode_options);
  EngineRequest busy{.id = RequestId(2), .prompt = {3, 4, 5}, .stopping = {.max_tokens = 3, .ignore_eos = true}};
  CollectingSink busy_sink;
  ASSERT_TRUE(decode.Submit(busy, &busy_sink).ok());
  ASSERT_TRUE(decode.Step().ok());  // the one running slot is taken

  const EngineRequest rest = DecodeHalf(false, handed.tokens(), "lease-q");
  CollectingSink continued;
  ASSERT_TRUE(decode.Submit(rest, &continued).ok());
  EXPECT_TRUE(fetcher.asked.empty()) << "queued behind a full batch, the pull waits for admission";
  ASSERT_TRUE(decode.Step().ok());
  ASSERT_TRUE(fetcher.asked.empty());
  EXPECT_EQ(fetcher.renewals, std::vector<std::string>{"lease-q"}) << "while it queues, it keeps the lease";
  EXPECT_EQ(prefill.Stats().kv_lease_counters.renewed, 1);
  RunToEnd(decode);
  ASSERT_TRUE(continued.finished());
  ASSERT_EQ(fetcher.asked.size(), 1u);
  EXPECT_GE(fetcher.renewals.size(), 1u);
  const size_t renewed = fetcher.renewals.size();
  EXPECT_EQ(decode.Stats().kv_peer.blocks_pulled, kPromptTokens / kBlockSize);
  EXPECT_EQ(prefill.Stats().kv_lease_counters.released, 1);
  ASSERT_TRUE(decode.Step().ok());
  EXPECT_EQ(fetcher.renewals.size(), renewed) << "no renewal once its pull has started";
}

TEST_F(EngineHandoffTest, AnUnpulledLeaseExpiresIntoOrdinaryCache) {
  auto executor = testing::NewTinyExecutor(*model_, 64, kBlockSize, 2);
  EngineOptions options = Options();
  options.kv_lease_duration = std::chrono::milliseconds(20);
  Engine prefill(*executor, options);
  EngineRequest r = PrefillOnly("never-pulled");
  CollectingSink sink;
  ASSERT_TRUE(prefill.Submit(r, &sink).ok());
  RunToEnd(prefill);
  EXPECT_EQ(prefill.Stats().kv_leases, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  ASSERT_TRUE(prefill.Step().ok());  // an idle step ends what is due
  EXPECT_EQ(prefill.Stats().kv_leases, 0);
  EXPECT_EQ(prefill.Stats().kv_lease_counters.expired, 1);
  EXPECT_EQ(prefill.Stats().blocks_used, 0);
  EXPECT_GE(prefill.Stats().blocks_cached, kPromptTokens / kBlockSize) << "still reusable, now evictable";
  EXPECT_TRUE(prefill.AuditBlocks().ok());
}

// The engine's own thread ends a lease at its deadline with no request
// or pull to wake it.
TEST_F(EngineHandoffTest, AnIdleEngineThreadEndsLeasesOnTime) {
  auto executor = testing::NewTinyExecutor(*model_, 64, kBlockSize, 2);
  EngineOptions options = Options();
  options.kv_lease_duration = std::chrono::milliseconds(50);
  Engine prefill(*executor, options);
  prefill.Start();
  EngineRequest r = PrefillOnly("idle");
  CollectingSink sink;
  ASSERT_TRUE(prefill.Submit(r, &sink).ok());
  sink.WaitFinished();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (prefill.Stats().kv_lease_counters.expired == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(prefill.Stats().kv_lease_counters.expired, 1);
  EXPECT_EQ(prefill.Stats().kv_leases, 0);
  prefill.Stop();
}

// The handoff stages the prompt's blocks: the decode worker's pull is
// answered on the calling thread at once, with the blocks a step's export
// would give, and the lease ends at the engine's next step. Without room
// to stage, the pull waits for a step as any export does.
TEST_F(EngineHandoffTest, AStagedHandoffAnswersThePullWithoutAStep) {
  for (const int64_t staging : {int64_t{256} << 20, int64_t{0}}) {
    SCOPED_TRACE(staging);
    auto executor = testing::NewTinyExecutor(*model_, 64, kBlockSize, 2);
    EngineOptions options = Options();
    options.kv_lease_staging_bytes = staging;
    Engine prefill(*executor, options);
    EngineRequest r = PrefillOnly("staged");
    CollectingSink sink;
    ASSERT_TRUE(prefill.Submit(r, &sink).ok());
    RunToEnd(prefill);
    const std::vector<BlockHash> hashes = HashFullBlocks(RootBlockHash("tiny", ""), r.prompt, kBlockSize);
    // Asked without the first two (the puller holds them), as a puller does.
    const std::vector<BlockHash> asked(hashes.begin() + 2, hashes.end());
    std::vector<KvBlockBytes> staged;
    bool answered = false;
    prefill.ExportKvBlocks(
        asked,
        [&](std::vector<KvBlockBytes> b) {
          staged = std::move(b);
          answered = true;
        },
        "staged");
    EXPECT_EQ(answered, staging > 0) << "staged: answered before any step";
    ASSERT_TRUE(prefill.Step().ok());
    ASSERT_TRUE(answered);
    ASSERT_EQ(staged.size(), asked.size());
    for (size_t i = 0; i < asked.size(); ++i) EXPECT_EQ(staged[i].hash, asked[i]);
    EXPECT_EQ(prefill.Stats().kv_leases, 0);
    EXPECT_EQ(prefill.Stats().kv_lease_counters.released, 1);
    EXPECT_EQ(prefill.Stats().kv_peer.blocks_served, static_cast<int64_t>(asked.size()));
    // The copy's bytes are the cache's: a step's export of the same blocks.
    std::vector<KvBlockBytes> fresh;
    prefill.ExportKvBlocks(asked, [&](std::vector<KvBlockBytes> b) { fresh = std::move(b); });
    ASSERT_TRUE(prefill.Step().ok());
    ASSERT_EQ(fresh.size(), staged.size());
    for (size_t i = 0; i < fresh.size(); ++i) EXPECT_EQ(fresh[i].bytes, staged[i].bytes) << i;
  }
}

TEST_F(EngineHandoffTest, AFirstTokenThatEndsTheRequestFinishesItWithoutALease) {
  auto executor = testing::NewTinyExecutor(*model_, 64, kBlockSize, 2);
  Engine prefill(*executor, Options());
  EngineRequest r = PrefillOnly("done", /*max_tokens=*/1);
  CollectingSink sink;
  ASSERT_TRUE(prefill.Submit(r, &sink).ok());
  RunToEnd(prefill);
  EXPECT_EQ(sink.reason(), FinishReason::kLength);
  EXPECT_EQ(sink.tokens().size(), 1u);
  EXPECT_EQ(prefill.Stats().kv_leases, 0);
}

}  // namespace
}  // namespace kvfleet::engine
