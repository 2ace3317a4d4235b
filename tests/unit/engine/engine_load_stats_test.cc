// The load the engine reports (what the router places by): requests still in
// the inbox count, a step in progress does not hide what it drained, a
// prefix shared by several requests counts once in the pending prefill, and
// the prefill rate is measured.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <numeric>
#include <vector>

#include "engine/engine.h"
#include "tests/testing/collecting_sink.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_executor.h"
#include "tests/unit/engine/tiny_model_suite.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {
namespace {

using ::kvfleet::testing::CollectingSink;

constexpr int32_t kBlockSize = 4;

std::vector<model::TokenId> Tokens(int first, int count) {
  std::vector<model::TokenId> t(static_cast<size_t>(count));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// A shared 32-token (8-block) prefix, then a 6-token tail of the request's own.
EngineRequest WithSharedPrefix(uint64_t id) {
  EngineRequest r{.id = RequestId(id), .prompt = Tokens(10, 32)};
  const std::vector<model::TokenId> tail = Tokens(100 + 10 * static_cast<int>(id), 6);
  r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
  r.stopping = {.max_tokens = 4, .ignore_eos = true};
  return r;
}

class EngineLoadStatsTest : public TinyModelSuite {
 protected:
  static void SetUpTestSuite() { LoadTinyModel({.seed = 5}); }

  std::unique_ptr<Engine> MakeEngine(SchedulerConfig config, StepObserver* observer = nullptr) {
    executor_ = testing::NewTinyExecutor(*model_, 256, kBlockSize, 2);
    return std::make_unique<Engine>(*executor_,
                                    EngineOptions{.model_id = "tiny", .scheduler = config, .step_observer = observer});
  }

  std::unique_ptr<ModelExecutor> executor_;
  std::map<uint64_t, CollectingSink> sinks_;
};

TEST_F(EngineLoadStatsTest, TheInboxCountsBeforeAnyStep) {
  auto engine = MakeEngine({.max_num_batched_tokens = 256});
  EngineRequest a{.id = RequestId(1), .prompt = Tokens(10, 20)}, b{.id = RequestId(2), .prompt = Tokens(50, 9)};
  a.stopping = b.stopping = {.max_tokens = 4, .ignore_eos = true};
  ASSERT_TRUE(engine->Submit(a, &sinks_[1]).ok());
  ASSERT_TRUE(engine->Submit(b, &sinks_[2]).ok());
  const EngineStats s = engine->Stats();
  EXPECT_EQ(s.waiting, 2);
  EXPECT_EQ(s.pending_prefill_tokens, 29);
}

TEST_F(EngineLoadStatsTest, AnInboxRequestSharingAnActivePrefixCountsOnlyItsOwnTokens) {
  auto engine = MakeEngine({.max_num_batched_tokens = 256});
  ASSERT_TRUE(engine->Submit(WithSharedPrefix(1), &sinks_[1]).ok());
  ASSERT_TRUE(engine->Submit(WithSharedPrefix(2), &sinks_[2]).ok());
  ASSERT_TRUE(engine->Submit(WithSharedPrefix(3), &sinks_[3]).ok());
  // The first computes the 38 tokens; the others only their 6-token tails.
  EXPECT_EQ(engine->Stats().pending_prefill_tokens, 38 + 6 + 6);
}

TEST_F(EngineLoadStatsTest, AQueuedRequestSharingARunningOnesPrefixCountsOnlyItsOwnTokens) {
  // One running slot and a budget that prefills 8 tokens a step: request 1
  // runs mid-prefill, request 2 waits behind it for the same prefix.
  auto engine = MakeEngine({.max_num_batched_tokens = 8, .max_num_seqs = 1});
  ASSERT_TRUE(engine->Submit(WithSharedPrefix(1), &sinks_[1]).ok());
  ASSERT_TRUE(engine->Submit(WithSharedPrefix(2), &sinks_[2]).ok());
  ASSERT_TRUE(engine->Step().ok());
  const EngineStats s = engine->Stats();
  EXPECT_EQ(s.running, 1);
  EXPECT_EQ(s.waiting, 1);
  // 38 - 8 left of the first; the second's 32-token prefix is the first's.
  EXPECT_EQ(s.pending_prefill_tokens, 30 + 6);
}

TEST_F(EngineLoadStatsTest, ACachedPrefixIsNotPending) {
  auto engine = MakeEngine({.max_num_batched_tokens = 256, .max_num_seqs = 1});
  ASSERT_TRUE(engine->Submit(WithSharedPrefix(1), &sinks_[1]).ok());
  while (engine->HasWork()) ASSERT_TRUE(engine->Step().ok());
  // Request 1 is done; its prefix is cached. Two more queue behind a
  // long-running third that holds the only slot.
  EngineRequest busy{.id = RequestId(9), .prompt = Tokens(200, 5)};
  busy.stopping = {.max_tokens = 50, .ignore_eos = true};
  ASSERT_TRUE(engine->Submit(busy, &sinks_[9]).ok());
  ASSERT_TRUE(engine->Step().ok());
  ASSERT_TRUE(engine->Submit(WithSharedPrefix(2), &sinks_[2]).ok());
  ASSERT_TRUE(engine->Submit(WithSharedPrefix(3), &sinks_[3]).ok());
  ASSERT_TRUE(engine->Step().ok());
  const EngineStats s = engine->Stats();
  EXPECT_EQ(s.waiting, 2);
  EXPECT_EQ(s.pending_prefill_tokens, 6 + 6);
}

// A fetcher that holds every pull until the test answers it.
class HeldFetcher final : public KvPeerFetcher {
 public:
  void Fetch(const std::string&, const std::string&, std::vector<BlockHash>, const std::string&, Done done) override {
    held.push_back(std::move(done));
  }
  void RenewLease(const std::string&, const std::string&) override {}
  std::vector<Done> held;
};

// A split request's prompt blocks are on their way from the prefill worker:
// while they travel they are not prefill this worker owes; those the pull
// did not bring are again.
TEST_F(EngineLoadStatsTest, BlocksAPullIsBringingAreNotPending) {
  HeldFetcher fetcher;
  executor_ = testing::NewTinyExecutor(*model_, 256, kBlockSize, 2);
  auto engine = std::make_unique<Engine>(
      *executor_,
      EngineOptions{.model_id = "tiny", .scheduler = {.max_num_batched_tokens = 8}, .kv_peer_fetcher = &fetcher});
  EngineRequest split = WithSharedPrefix(1);  // 38 tokens: 9 full blocks and 2 more
  split.resumed_output = {7};
  split.kv_peer = KvPeerSource{.endpoint = "prefill-0:7002", .blocks = 9, .lease_id = "lease-1"};
  ASSERT_TRUE(engine->Submit(split, &sinks_[1]).ok());
  ASSERT_EQ(fetcher.held.size(), 1u) << "pulled from its arrival";
  EXPECT_EQ(engine->Stats().pending_prefill_tokens, 2 + 1) << "in the inbox: the tail and the resumed token";
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(engine->Stats().pending_prefill_tokens, 2 + 1) << "drained, the pull still travelling";
  fetcher.held[0]({}, absl::UnavailableError("the prefill worker is gone"));
  ASSERT_TRUE(engine->Step().ok());  // the failed pull lands; its first 8 tokens are computed
  EXPECT_EQ(engine->Stats().pending_prefill_tokens, 38 + 1 - 8) << "what the pull did not bring is owed again";
  while (engine->HasWork()) ASSERT_TRUE(engine->Step().ok());
  EXPECT_TRUE(sinks_[1].finished());
  EXPECT_EQ(engine->Stats().pending_prefill_tokens, 0);
  EXPECT_EQ(engine->Stats().kv_peer.pulls_failed, 1);
}

// Reads the engine's stats from inside a step, as the KV event publisher
// may while a long step runs on a CPU.
class StatsDuringStep : public StepObserver {
 public:
  void OnStep(const StepReport&) override {
    if (engine != nullptr && !seen) seen = engine->Stats();
  }
  Engine* engine = nullptr;
  std::optional<EngineStats> seen;
};

TEST_F(EngineLoadStatsTest, AStepInProgressStillCountsWhatItTookFromTheInbox) {
  StatsDuringStep observer;
  auto engine = MakeEngine({.max_num_batched_tokens = 8, .max_num_seqs = 1}, &observer);
  observer.engine = engine.get();
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(engine->Submit(WithSharedPrefix(id), &sinks_[id]).ok());
  ASSERT_TRUE(engine->Step().ok());
  ASSERT_TRUE(observer.seen.has_value());
  EXPECT_EQ(observer.seen->running + observer.seen->waiting, 3);
  EXPECT_EQ(observer.seen->pending_prefill_tokens, 38 + 6 + 6);
}

TEST_F(EngineLoadStatsTest, ThePrefillRateIsMeasured) {
  auto engine = MakeEngine({.max_num_batched_tokens = 256});
  EXPECT_EQ(engine->Stats().prefill_tokens_per_second, 0.0);
  ASSERT_TRUE(engine->Submit(WithSharedPrefix(1), &sinks_[1]).ok());
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_GT(engine->Stats().prefill_tokens_per_second, 0.0);
}

}  // namespace
}  // namespace kvfleet::engine
