// What the worker service relies on besides exactness: admission limits,
// the heartbeat its watchdog reads, step reports, queue time and logprobs.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "engine/engine.h"
#include "tests/testing/collecting_sink.h"
#include "tests/testing/recording_kv_listener.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_executor.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::engine {
namespace {

using ::kvfleet::testing::CollectingSink;

class EngineHooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        tools::WriteTinyModel(testing::TestModelShape({.dtype = DType::kF32, .seed = 5}), dir_.Path("t.gguf")).ok());
    model_ = std::move(*model::Model::Load(dir_.Path("t.gguf")));
    executor_ = testing::NewTinyExecutor(*model_, 64, 4, 1);
  }
  static EngineRequest Greedy(uint64_t id, int max_tokens) {
    return {.id = RequestId(id),
            .prompt = {5, 6, 7, 8, 9},
            .sampling = {.temperature = 0.0f},
            .stopping = {.max_tokens = max_tokens, .ignore_eos = true}};
  }
  kvfleet::testing::TempDir dir_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<ModelExecutor> executor_;
};

TEST_F(EngineHooksTest, WaitingQueueLimitRefusesWithResourceExhausted) {
  // One running slot and two waiting places: the fourth request is refused.
  Engine engine(*executor_, {.model_id = "tiny", .scheduler = {.max_num_seqs = 1}, .max_waiting_requests = 2});
  CollectingSink a, b, c, d;
  ASSERT_TRUE(engine.Submit(Greedy(1, 2), &a).ok());
  ASSERT_TRUE(engine.Submit(Greedy(2, 2), &b).ok());
  ASSERT_TRUE(engine.Submit(Greedy(4, 2), &d).ok());
  const absl::Status full = engine.Submit(Greedy(3, 2), &c);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_NE(full.message().find("waiting queue is full"), std::string::npos) << full;
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  EXPECT_TRUE(a.finished() && b.finished() && d.finished());
  EXPECT_TRUE(engine.Submit(Greedy(3, 2), &c).ok()) << "the queue drained; the limit must lift";
}

TEST_F(EngineHooksTest, HeartbeatCountsInFlightRequests) {
  Engine engine(*executor_, {.model_id = "tiny"});
  EXPECT_EQ(engine.Heartbeat().in_flight, 0);
  CollectingSink sink;
  ASSERT_TRUE(engine.Submit(Greedy(1, 3), &sink).ok());
  EXPECT_EQ(engine.Heartbeat().in_flight, 1);
  const auto before = engine.Heartbeat().last_progress;
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(engine.Heartbeat().in_flight, 0);
  EXPECT_GE(engine.Heartbeat().last_progress, before);
}

struct RecordingObserver : StepObserver {
  void OnStep(const StepReport& r) override { reports.push_back(r); }
  std::vector<StepReport> reports;
};

TEST_F(EngineHooksTest, StepObserverSeesEveryForwardPass) {
  RecordingObserver observer;
  Engine engine(*executor_, {.model_id = "tiny", .step_observer = &observer});
  CollectingSink sink;
  ASSERT_TRUE(engine.Submit(Greedy(1, 4), &sink).ok());
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  ASSERT_EQ(observer.reports.size(), 4u);  // one prefill (with the first token), three decodes
  EXPECT_EQ(observer.reports[0].num_tokens, 5);
  EXPECT_EQ(observer.reports[0].num_prefill_tokens, 4);
  EXPECT_EQ(observer.reports[1].num_tokens, 1);
  EXPECT_EQ(observer.reports[1].num_prefill_tokens, 0);
  for (const StepReport& r : observer.reports) {
    EXPECT_EQ(r.num_sequences, 1);
    EXPECT_GE(r.seconds, 0.0);
  }
}

TEST_F(EngineHooksTest, QueueTimeOnlyForRequestsThatRan) {
  Engine engine(*executor_, {.model_id = "tiny"});
  CollectingSink ran, cancelled;
  ASSERT_TRUE(engine.Submit(Greedy(1, 2), &ran).ok());
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  EXPECT_GE(ran.queue_seconds(), 0.0);
  ASSERT_TRUE(engine.Submit(Greedy(2, 2), &cancelled).ok());
  engine.Cancel(RequestId(2));
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(cancelled.reason(), FinishReason::kCancelled);
  EXPECT_LT(cancelled.queue_seconds(), 0.0);
}

TEST_F(EngineHooksTest, LogprobsAccompanyEveryTokenAndLeaveTokensUnchanged) {
  Engine engine(*executor_, {.model_id = "tiny"});
  CollectingSink plain, with;
  EngineRequest r = Greedy(1, 6);
  ASSERT_TRUE(engine.Submit(r, &plain).ok());
  r.id = RequestId(2);
  r.logprobs = {.enabled = true, .top_n = 3};
  ASSERT_TRUE(engine.Submit(r, &with).ok());
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  ASSERT_EQ(plain.tokens(), with.tokens());
  EXPECT_TRUE(plain.logprobs().empty());
  const auto lps = with.logprobs();
  ASSERT_EQ(lps.size(), with.tokens().size());
  for (size_t i = 0; i < lps.size(); ++i) {
    EXPECT_EQ(lps[i].token, with.tokens()[i]);
    ASSERT_EQ(lps[i].top.size(), 3u);
    // Greedy picks the argmax, which is the top alternative.
    EXPECT_EQ(lps[i].top[0].first, lps[i].token);
    EXPECT_FLOAT_EQ(lps[i].top[0].second, lps[i].logprob);
    EXPECT_LE(lps[i].logprob, 0.0f);
  }
}

TEST_F(EngineHooksTest, KvSnapshotListsExactlyWhatTheEventsLeftLive) {
  kvfleet::testing::RecordingKvListener listener;
  Engine engine(*executor_, {.model_id = "tiny"}, &listener);
  CollectingSink a, b;
  EngineRequest r = Greedy(1, 9);
  r.prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  ASSERT_TRUE(engine.Submit(r, &a).ok());
  ASSERT_TRUE(engine.Submit(Greedy(2, 6), &b).ok());
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  engine.RequestKvSnapshot();
  EXPECT_TRUE(engine.HasWork()) << "a snapshot request is work, even when idle";
  ASSERT_TRUE(engine.Step().ok());
  ASSERT_EQ(listener.snapshots().size(), 1u);
  absl::flat_hash_set<BlockHash> snapshot;
  // Each block with the parent it was stored with, so the index keeps its chains.
  absl::flat_hash_map<BlockHash, std::optional<BlockHash>> stored_parent;
  for (const kvfleet::testing::KvEvent& e : listener.events()) {
    if (e.kind == kvfleet::testing::KvEvent::Kind::kStored) stored_parent[e.hash] = e.parent;
  }
  int with_parent = 0;
  for (const CachedBlock& block : listener.snapshots()[0]) {
    snapshot.insert(block.hash);
    EXPECT_EQ(block.parent, stored_parent.at(block.hash)) << block.hash.ToHex();
    with_parent += block.parent.has_value();
  }
  EXPECT_EQ(snapshot.size(), listener.snapshots()[0].size()) << "no hash twice";
  EXPECT_EQ(snapshot, listener.live());
  EXPECT_GE(snapshot.size(), 4u);  // 19 tokens of request 1 fill four blocks of 4
  EXPECT_GE(with_parent, 3) << "every block after a sequence's first names its parent";
  EXPECT_TRUE(listener.errors().empty());
}

// Failover resumes a request on another engine from its prompt plus the
// tokens already streamed: the continuation must be exactly what the first
// engine would have produced, penalties and seeded sampling included.
TEST_F(EngineHooksTest, AResumedRequestContinuesExactlyWhereTheFirstEngineWas) {
  EngineRequest r{.id = RequestId(1),
                  .prompt = {7, 3, 9, 11, 3, 7, 20, 21},
                  .sampling = {.temperature = 0.9f,
                               .top_k = 30,
                               .repetition_penalty = 1.3f,
                               .presence_penalty = 0.5f,
                               .frequency_penalty = 0.4f,
                               .seed = 77},
                  .stopping = {.max_tokens = 24, .ignore_eos = true}};
  for (const bool greedy : {false, true}) {
    if (greedy) r.sampling = {.temperature = 0.0f, .repetition_penalty = 1.3f, .presence_penalty = 0.5f};
    std::vector<model::TokenId> whole;
    {
      Engine engine(*executor_, {.model_id = "tiny"});
      CollectingSink sink;
      ASSERT_TRUE(engine.Submit(r, &sink).ok());
      while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
      whole = sink.tokens();
    }
    ASSERT_EQ(whole.size(), 24u);
    for (const size_t cut : {1u, 9u, 23u}) {
      Engine engine(*executor_, {.model_id = "tiny"});
      CollectingSink sink;
      EngineRequest resumed = r;
      resumed.resumed_output.assign(whole.begin(), whole.begin() + cut);
      ASSERT_TRUE(engine.Submit(resumed, &sink).ok());
      while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
      EXPECT_EQ(sink.tokens(), std::vector<model::TokenId>(whole.begin() + cut, whole.end()))
          << (greedy ? "greedy" : "seeded") << ", resumed after " << cut;
      EXPECT_EQ(sink.usage().generated_tokens, static_cast<int32_t>(24 - cut));
      EXPECT_EQ(sink.usage().prompt_tokens, 8);
    }
  }
  Engine engine(*executor_, {.model_id = "tiny"});
  CollectingSink sink;
  EngineRequest done = r;
  done.resumed_output.assign(24, 5);
  EXPECT_EQ(engine.Submit(done, &sink).code(), absl::StatusCode::kInvalidArgument) << "nothing left to generate";
}

// The router and the cachemanager compute a prompt's block hashes with
// common/block_hash.h alone; the engine must publish exactly those, or
// prefix-aware routing silently finds nothing.
TEST_F(EngineHooksTest, PublishedHashesAreTheOnesCommonComputesForThePrompt) {
  for (const std::string salt : {"", "tenant-7"}) {
    kvfleet::testing::RecordingKvListener listener;
    Engine engine(*executor_, {.model_id = "tiny-model"}, &listener);
    CollectingSink sink;
    EngineRequest r = Greedy(1, 1);
    r.prompt = {11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23};  // three full blocks of 4, and one token
    r.cache_salt = salt;
    ASSERT_TRUE(engine.Submit(r, &sink).ok());
    while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
    const std::vector<BlockHash> expected = HashFullBlocks(RootBlockHash("tiny-model", salt), r.prompt, 4);
    ASSERT_EQ(expected.size(), 3u);
    std::vector<BlockHash> stored;
    for (const auto& e : listener.events()) {
      if (e.kind == kvfleet::testing::KvEvent::Kind::kStored) stored.push_back(e.hash);
    }
    ASSERT_GE(stored.size(), 3u);
    EXPECT_EQ(std::vector<BlockHash>(stored.begin(), stored.begin() + 3), expected) << "salt '" << salt << "'";
    EXPECT_FALSE(listener.events()[0].parent.has_value());
    EXPECT_EQ(listener.events()[1].parent, expected[0]);
  }
}

}  // namespace
}  // namespace kvfleet::engine
