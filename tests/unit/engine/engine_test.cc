// The engine's exactness: a request's tokens are identical run alone or
// among others, with a prefix-cache hit or cold, in any prefill chunk size,
// and when preempted and recomputed — greedy and seeded alike.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "tests/testing/collecting_sink.h"
#include "tests/testing/test_executor.h"
#include "tests/unit/engine/tiny_model_suite.h"

namespace kvfleet::engine {
namespace {

using ::kvfleet::testing::CollectingSink;

constexpr int32_t kBlockSize = 4;

class EngineTest : public TinyModelSuite {
 protected:
  static void SetUpTestSuite() { LoadTinyModel({.dtype = DType::kQ8_0, .seed = 21}); }

  struct Run {
    std::map<uint64_t, std::vector<model::TokenId>> tokens;
    std::map<uint64_t, Usage> usage;
    EngineStats stats;
  };

  // Runs every request to completion on a fresh engine, synchronously.
  static Run RunAll(const std::vector<EngineRequest>& requests, SchedulerConfig config, int64_t num_blocks = 256,
                    bool prefix_caching = true) {
    auto executor =
        testing::NewTinyExecutor(*model_, num_blocks, kBlockSize, 2);
    Engine engine(*executor, {.model_id = "tiny", .scheduler = config, .enable_prefix_caching = prefix_caching});
    std::map<uint64_t, CollectingSink> sinks;
    for (const EngineRequest& r : requests) {
      EXPECT_TRUE(engine.Submit(r, &sinks[r.id.value()]).ok());
    }
    int steps = 0;
    while (engine.HasWork()) {
      EXPECT_TRUE(engine.Step().ok());
      EXPECT_LT(++steps, 100000) << "engine does not make progress";
    }
    Run run;
    for (auto& [id, sink] : sinks) {
      EXPECT_TRUE(sink.finished()) << "request " << id;
      run.tokens[id] = sink.tokens();
      run.usage[id] = sink.usage();
    }
    run.stats = engine.Stats();
    return run;
  }

  static EngineRequest RandomRequest(uint64_t id, std::mt19937& rng, bool seeded) {
    EngineRequest r{.id = RequestId(id)};
    const int len = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) r.prompt.push_back(static_cast<model::TokenId>(rng() % 280));
    r.stopping = {.max_tokens = 1 + static_cast<int32_t>(rng() % 20), .ignore_eos = true};
    r.sampling = seeded ? SamplingParams{.temperature = 0.8f, .top_k = 50, .seed = id * 7919}
                        : SamplingParams{.temperature = 0.0f};
    return r;
  }

  static std::vector<model::TokenId> Alone(const EngineRequest& r) {
    return RunAll({r}, {.max_num_batched_tokens = 4096}).tokens.begin()->second;
  }
};

TEST_F(EngineTest, AloneEqualsBatchedAmongOthers) {
  for (bool seeded : {false, true}) {
    for (int others : {1, 3, 8, 31}) {
      std::mt19937 rng(others * 2 + seeded);
      std::vector<EngineRequest> requests;
      for (int i = 0; i <= others; ++i) requests.push_back(RandomRequest(i + 1, rng, seeded));
      const Run batched = RunAll(requests, {.max_num_batched_tokens = 64, .max_num_seqs = 32});
      for (const EngineRequest& r : requests) {
        ASSERT_EQ(batched.tokens.at(r.id.value()), Alone(r))
            << "request " << r.id << " among " << others << " others, seeded " << seeded;
      }
    }
  }
}

TEST_F(EngineTest, ChunkSizesDoNotChangeOutputs) {
  std::mt19937 rng(5);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 6; ++i) requests.push_back(RandomRequest(i + 1, rng, i % 2 == 0));
  const Run whole = RunAll(requests, {.max_num_batched_tokens = 4096});
  for (int32_t chunk : {1, 7, 64}) {
    const Run chunked = RunAll(requests, {.max_num_batched_tokens = chunk});
    EXPECT_EQ(chunked.tokens, whole.tokens) << "chunk " << chunk;
  }
}

TEST_F(EngineTest, PrefixHitGivesTheSameTokensAsCold) {
  // 23 shared tokens, then one of each request's own.
  std::vector<model::TokenId> prompt(24);
  for (int i = 0; i < 23; ++i) prompt[i] = (i * 13 + 5) % 280;
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 4; ++i) {
    prompt[23] = static_cast<model::TokenId>(100 + i);
    EngineRequest r{.id = RequestId(i + 1), .prompt = prompt, .stopping = {.max_tokens = 12, .ignore_eos = true}};
    r.sampling = i % 2 ? SamplingParams{.temperature = 1.0f, .seed = 3} : SamplingParams{.temperature = 0.0f};
    requests.push_back(r);
  }
  // One at a time so later ones hit the blocks the first one cached.
  const Run cold = RunAll(requests, {.max_num_batched_tokens = 4096}, 256, /*prefix_caching=*/false);
  const Run warm = RunAll(requests, {.max_num_batched_tokens = 4096, .max_num_seqs = 1});
  EXPECT_EQ(warm.tokens, cold.tokens);
  EXPECT_EQ(warm.usage.at(1).cached_prompt_tokens, 0);
  for (uint64_t id = 2; id <= 4; ++id) EXPECT_EQ(warm.usage.at(id).cached_prompt_tokens, 20) << id;  // 5 full blocks
  EXPECT_EQ(warm.stats.prefix_queried_tokens, 4 * 24);
  EXPECT_EQ(warm.stats.prefix_hit_tokens, 3 * 20);
  EXPECT_EQ(cold.stats.prefix_hit_tokens, 0);
}

TEST_F(EngineTest, DifferentCacheSaltsDoNotShareBlocks) {
  EngineRequest a{.id = RequestId(1),
                  .prompt = std::vector<model::TokenId>(17, 9),
                  .sampling = {.temperature = 0.0f},
                  .stopping = {.max_tokens = 2}};
  EngineRequest b = a;
  b.id = RequestId(2);
  b.cache_salt = "tenant-b";
  const Run run = RunAll({a, b}, {.max_num_seqs = 1});
  EXPECT_EQ(run.usage.at(2).cached_prompt_tokens, 0);
  EngineRequest c = a;
  c.id = RequestId(3);
  EXPECT_EQ(RunAll({a, c}, {.max_num_seqs = 1}).usage.at(3).cached_prompt_tokens, 16);
}

TEST_F(EngineTest, PreemptionByRecomputeKeepsOutputs) {
  std::mt19937 rng(9);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 10; ++i) requests.push_back(RandomRequest(i + 1, rng, i % 3 == 0));
  const Run roomy = RunAll(requests, {.max_num_batched_tokens = 128});
  // 16 blocks of 4 tokens: enough for any one request (≤ 59 tokens), far too
  // few for ten at once.
  // No growth reserve: admit into the last blocks, so growth must preempt.
  const Run tight = RunAll(requests, {.max_num_batched_tokens = 128, .growth_reserve_blocks = 0}, /*num_blocks=*/16);
  EXPECT_GT(tight.stats.preemptions, 0);
  EXPECT_EQ(tight.tokens, roomy.tokens);
  EXPECT_EQ(tight.stats.blocks_used, 0);
}

TEST_F(EngineTest, EveryBlockReturnsAfterFinishAndCancel) {
  auto executor = testing::NewTinyExecutor(*model_, 128, kBlockSize, 1);
  Engine engine(*executor, {.model_id = "tiny", .scheduler = {.max_num_batched_tokens = 32}});
  std::mt19937 rng(3);
  std::map<uint64_t, CollectingSink> sinks;
  for (uint64_t id = 1; id <= 20; ++id) {
    EngineRequest r = RandomRequest(id, rng, false);
    r.stopping.max_tokens = 20;
    ASSERT_TRUE(engine.Submit(r, &sinks[id]).ok());
  }
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(engine.Step().ok());
  EXPECT_GT(engine.Stats().blocks_used, 0);
  for (uint64_t id = 1; id <= 20; id += 2) engine.Cancel(RequestId(id));
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  for (uint64_t id = 1; id <= 20; ++id) {
    ASSERT_TRUE(sinks[id].finished());
    if (id % 2 == 1) {
      EXPECT_EQ(sinks[id].reason(), FinishReason::kCancelled);
    } else {
      EXPECT_EQ(sinks[id].reason(), FinishReason::kLength);
      EXPECT_EQ(sinks[id].tokens().size(), 20u);
    }
  }
  const EngineStats s = engine.Stats();
  EXPECT_EQ(s.blocks_used, 0);
  EXPECT_EQ(s.blocks_free, s.blocks_total);
  EXPECT_EQ(s.running + s.waiting, 0);
}

TEST_F(EngineTest, StopsAtAStopTokenAndDeliversIt) {
  EngineRequest r{.id = RequestId(1),
                  .prompt = {5, 6, 7},
                  .sampling = {.temperature = 0.0f},
                  .stopping = {.max_tokens = 16, .ignore_eos = true}};
  const std::vector<model::TokenId> free_run = Alone(r);
  ASSERT_EQ(free_run.size(), 16u);
  r.stopping.stop_token_ids = {free_run[3]};
  const Run stopped = RunAll({r}, {});
  // Stops at the first occurrence of that token, which may come earlier.
  const auto first = std::find(free_run.begin(), free_run.end(), free_run[3]);
  EXPECT_EQ(stopped.tokens.at(1), std::vector<model::TokenId>(free_run.begin(), first + 1));
  EXPECT_EQ(stopped.usage.at(1).generated_tokens, static_cast<int32_t>(first - free_run.begin()) + 1);
  EXPECT_EQ(stopped.usage.at(1).prompt_tokens, 3);
}

TEST_F(EngineTest, OneOutputPerTokenAndTheLastCarriesTheEnd) {
  auto executor = testing::NewTinyExecutor(*model_, 32, kBlockSize, 1);
  Engine engine(*executor, {.model_id = "tiny"});
  CollectingSink sink;
  ASSERT_TRUE(
      engine.Submit({.id = RequestId(1), .prompt = {4, 5}, .stopping = {.max_tokens = 5, .ignore_eos = true}}, &sink)
          .ok());
  while (engine.HasWork()) ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(sink.outputs(), 5);
  EXPECT_EQ(sink.tokens().size(), 5u);
  EXPECT_EQ(sink.reason(), FinishReason::kLength);
  EXPECT_EQ(sink.usage().generated_tokens, 5);
}

TEST_F(EngineTest, ImpossibleRequestsAreRejectedAtSubmission) {
  auto executor = testing::NewTinyExecutor(*model_, 8, kBlockSize, 1);
  Engine engine(*executor, {.model_id = "tiny"});
  CollectingSink sink;
  auto status = [&](EngineRequest r) { return engine.Submit(std::move(r), &sink); };
  EXPECT_NE(status({.id = RequestId(1)}).message().find("prompt is empty"), std::string::npos);
  const absl::Status context =
      status({.id = RequestId(2), .prompt = std::vector<model::TokenId>(250, 1), .stopping = {.max_tokens = 10}});
  EXPECT_EQ(context.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(context.message().find("context length of 256"), std::string::npos) << context;
  const absl::Status pool =
      status({.id = RequestId(3), .prompt = std::vector<model::TokenId>(30, 1), .stopping = {.max_tokens = 10}});
  EXPECT_NE(pool.message().find("whole cache has 8"), std::string::npos) << pool;
  EXPECT_NE(status({.id = RequestId(4), .prompt = {1}, .sampling = {.top_p = 2.0f}}).message().find("top_p"),
            std::string::npos);
  EXPECT_FALSE(engine.HasWork());
  ASSERT_TRUE(status({.id = RequestId(5), .prompt = {1}, .stopping = {.max_tokens = 2}}).ok());
  EXPECT_EQ(status({.id = RequestId(5), .prompt = {1}, .stopping = {.max_tokens = 2}}).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(EngineTest, EngineThreadServesConcurrentSubmitters) {
  std::mt19937 rng(77);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 12; ++i) requests.push_back(RandomRequest(i + 1, rng, i % 2 == 0));
  const Run reference = RunAll(requests, {.max_num_batched_tokens = 64});

  auto executor = testing::NewTinyExecutor(*model_, 256, kBlockSize, 1);
  Engine engine(*executor, {.model_id = "tiny", .scheduler = {.max_num_batched_tokens = 64}});
  engine.Start();
  std::map<uint64_t, CollectingSink> sinks;
  for (const auto& r : requests) sinks[r.id.value()];
  std::vector<std::thread> clients;
  for (int t = 0; t < 3; ++t) {
    clients.emplace_back([&, t] {
      for (size_t i = t; i < requests.size(); i += 3) {
        EXPECT_TRUE(engine.Submit(requests[i], &sinks.at(requests[i].id.value())).ok());
      }
    });
  }
  for (auto& c : clients) c.join();
  for (auto& [id, sink] : sinks) {
    sink.WaitFinished();
    EXPECT_EQ(sink.tokens(), reference.tokens.at(id)) << id;
  }
  engine.Stop();
}

}  // namespace
}  // namespace kvfleet::engine
